#include "server/bounded_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace strata {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// How often a blocked read or wait looks at its deadline again (the pressure can change).
constexpr milliseconds kSlice{100};

void address_of(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int rc = peer ? getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
                      : getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

int poll_for(int sock, short events, milliseconds wait) {
  pollfd p{sock, events, 0};
  int rc;
  do {
    rc = poll(&p, 1, static_cast<int>(wait.count()));
  } while (rc < 0 && errno == EINTR);
  if (rc <= 0) return rc;
  if (p.revents & (POLLERR | POLLNVAL)) return -1;
  return p.revents & (events | POLLHUP) ? 1 : 0;
}

}  // namespace

// One connection's socket as httplib's Stream: reads buffered and bounded by the request's
// deadline, writes bounded by the write limit.
class BoundedServer::Connection : public httplib::Stream {
 public:
  Connection(int sock, BoundedServer& server) : sock_(sock), server_(server) {}
  ~Connection() override { end_read(); }

  // Waits for the first byte of the next request: false when the client stays idle past the
  // keep-alive limit (sooner under pressure), hangs up, or the server stops.
  bool wait_for_request() {
    if (begin_ < end_) return true;
    const auto start = Clock::now();
    for (;;) {
      const auto idle = Clock::now() - start;
      const milliseconds limit = server_.under_pressure()
                                     ? server_.limits_.request_read_under_pressure
                                     : server_.limits_.keep_alive;
      if (idle >= limit || server_.stopping()) return false;
      const int rc = poll_for(sock_, POLLIN, kSlice);
      if (rc < 0) return false;
      if (rc > 0) return true;
    }
  }

  // The read phase of a request: from its first byte until its response begins.
  void begin_read() {
    end_read();
    read_started_ = Clock::now();
    reading_ = true;
    ++server_.reading_;
  }
  void end_read() {
    if (!reading_) return;
    reading_ = false;
    --server_.reading_;
  }

  // The last request was not read within its deadline.
  bool too_slow() const { return too_slow_; }

  bool is_readable() const override { return begin_ < end_ || poll_for(sock_, POLLIN, kSlice) > 0; }

  bool is_writable() const override {
    return poll_for(sock_, POLLOUT, server_.limits_.write) > 0 && !peer_closed();
  }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_ && !fill()) return -1;
    const size_t n = std::min(size, end_ - begin_);
    std::copy(buffer_ + begin_, buffer_ + begin_ + n, ptr);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    end_read();  // the response has begun: the request's deadline no longer applies
    if (poll_for(sock_, POLLOUT, server_.limits_.write) <= 0) return -1;
    ssize_t n;
    do {
      n = send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(sock_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(sock_, false, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  // Reads what the socket has, waiting no longer than the request's deadline allows.
  bool fill() {
    for (;;) {
      if (reading_) {
        const milliseconds limit = server_.under_pressure()
                                       ? server_.limits_.request_read_under_pressure
                                       : server_.limits_.request_read;
        if (Clock::now() - read_started_ >= limit) {
          too_slow_ = true;  // the connection ends after httplib's 400
          return false;
        }
      }
      const int rc = poll_for(sock_, POLLIN, kSlice);
      if (rc < 0) return false;
      if (rc == 0) {
        if (!reading_ && server_.stopping()) return false;
        continue;
      }
      ssize_t n;
      do {
        n = recv(sock_, buffer_, sizeof(buffer_), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return false;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
      return true;
    }
  }

  bool peer_closed() const {
    if (begin_ < end_) return false;
    if (poll_for(sock_, POLLIN, milliseconds(0)) <= 0) return false;
    char c;
    return recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }

  int sock_;
  BoundedServer& server_;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
  bool reading_ = false;
  bool too_slow_ = false;
  Clock::time_point read_started_;
};

BoundedServer::BoundedServer(ConnectionLimits limits) : limits_(limits) {}

bool BoundedServer::process_and_close_socket(socket_t sock) {
  bool ok = false;
  {
    Connection connection(sock, *this);
    // As httplib's own loop: up to keep_alive_max_count_ requests per connection, the last one
    // answered with "Connection: close".
    for (size_t left = keep_alive_max_count_; left > 0 && !stopping(); --left) {
      if (!connection.wait_for_request()) break;
      connection.begin_read();
      bool closed = false;
      ok = process_request(connection, left == 1, closed, [](httplib::Request& req) {
        // No length and no chunked encoding: no body (RFC 9112 6.3), read as empty at once.
        if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))
          req.set_header("Content-Length", "0");
      });
      connection.end_read();
      // A client too slow for one request is not given the time for another.
      if (!ok || closed || connection.too_slow()) break;
    }
  }
  shutdown(sock, SHUT_RDWR);
  close(sock);
  return ok;
}

}  // namespace strata
