#pragma once
// cpp-httplib's server with connections that cannot hold a worker thread by being slow.
// cpp-httplib 0.11 gives each connection a thread from the pool and bounds each read
// (set_read_timeout), but not a whole request: a client that sends one header byte every few
// seconds keeps its thread forever, and a few hundred of them leave no thread for /health.
// Here each connection runs over a socket stream that bounds the whole read of a request
// (request line, headers and body) by a deadline, shortened while many connections are
// reading at once, and the keep-alive wait for the next request likewise. The request handling
// itself is httplib's (process_request), so routes, parsing and responses are unchanged.
//
// It also reads a request with neither Content-Length nor Transfer-Encoding as an empty body,
// as HTTP/1.1 says (RFC 9112 6.3); httplib 0.11 reads such a body until the connection closes.
#include <httplib.h>

#include <atomic>
#include <chrono>

namespace strata {

struct ConnectionLimits {
  int threads = 256;  // the worker pool's size
  // Longest read of one request, from its first byte to its last.
  std::chrono::milliseconds request_read{10000};
  // ... while more than half the threads are reading requests: slow readers then give way.
  std::chrono::milliseconds request_read_under_pressure{1000};
  std::chrono::milliseconds keep_alive{5000};  // idle wait for a connection's next request
  std::chrono::milliseconds write{5000};       // longest wait for a client to take bytes
};

class BoundedServer : public httplib::Server {
 public:
  explicit BoundedServer(ConnectionLimits limits);

  // Connections reading a request now (for tests and the pressure rule).
  int reading() const { return reading_.load(); }

 private:
  class Connection;
  bool process_and_close_socket(socket_t sock) override;
  bool under_pressure() const { return reading_.load() * 2 > limits_.threads; }
  // stop() closes the listening socket at once (is_running() turns false only after every
  // connection has ended, so waiting on it would keep idle connections open until timeout).
  bool stopping() const { return svr_sock_ == INVALID_SOCKET; }

  ConnectionLimits limits_;
  std::atomic<int> reading_{0};
};

}  // namespace strata
