// The parts the route handlers share (serving.h): watching a client's connection, waiting on
// request streams, tracking the text of a choice, encoding prompts, server-sent events.
#include "server/serving.h"

#include <dirent.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <random>
#include <thread>

#include "core/error.h"
#include "server/request_parsing.h"

namespace strata {

using namespace std::chrono_literals;

namespace {

// host and port of a socket address, spelled as cpp-httplib spells Request::remote_addr.
bool same_address(const sockaddr_storage& a, socklen_t len, const std::string& host, int port) {
  const int a_port =
      a.ss_family == AF_INET    ? ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port)
      : a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port)
                                : -1;
  if (a_port != port) return false;
  char name[NI_MAXHOST];
  return getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, name, sizeof(name), nullptr, 0,
                     NI_NUMERICHOST) == 0 &&
         host == name;
}

constexpr auto kFirstConnectionCheck = 100ms;  // requests shorter than this never look
constexpr auto kConnectionCheckInterval = 50ms;

}  // namespace

ConnectionWatch::ConnectionWatch(const httplib::Request& req)
    : local_addr_(req.local_addr),
      remote_addr_(req.remote_addr),
      local_port_(req.local_port),
      remote_port_(req.remote_port) {}

int ConnectionWatch::find_socket() const {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
      continue;
    if (same_address(local, local_len, local_addr_, local_port_) &&
        same_address(peer, peer_len, remote_addr_, remote_port_)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

bool ConnectionWatch::client_gone() const {
  if (fd_ == kNotLooked) fd_ = find_socket();  // on first use: most requests end before
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) != 1) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  // Readable without a hang-up: a pipelined next request, or the end of the stream.
  char c;
  return (p.revents & POLLIN) && recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

bool pump(Engine& engine, const std::vector<std::shared_ptr<RequestStream>>& streams,
          const std::function<bool(size_t, RequestOutput&)>& on_output,
          const ConnectionWatch* watch) {
  std::vector<bool> done(streams.size(), false);
  size_t remaining = streams.size();
  auto abort_unfinished = [&] {
    for (size_t k = 0; k < streams.size(); ++k)
      if (!done[k]) engine.abort(streams[k]->id());
    return false;
  };
  auto next_check = std::chrono::steady_clock::now() + kFirstConnectionCheck;
  while (remaining > 0) {
    bool got = false;
    for (size_t i = 0; i < streams.size(); ++i) {
      RequestOutput o;
      // One stream left: block on it; several: poll each in turn.
      while (!done[i] && streams[i]->next(o, remaining == 1 ? 50ms : 0ms)) {
        got = true;
        if (o.finished) {
          done[i] = true;
          --remaining;
        }
        if (o.finished && !o.error.empty()) {
          // The request failed while it ran (or was refused at shutdown): the whole answer
          // is that error, and the request's siblings (n > 1, a batch) end with it.
          abort_unfinished();
          throw HttpError(o.error_retryable ? 503 : 400, o.error, "",
                          o.error_retryable ? "service_unavailable" : "invalid_request_error");
        }
        if (!on_output(i, o)) return abort_unfinished();
      }
    }
    if (watch && remaining > 0 && std::chrono::steady_clock::now() >= next_check) {
      if (watch->client_gone()) return abort_unfinished();
      next_check = std::chrono::steady_clock::now() + kConnectionCheckInterval;
    }
    if (!got && remaining > 1) std::this_thread::sleep_for(1ms);
  }
  return true;
}

TextTracker::TextTracker(const TextCodec* codec, std::vector<std::string> stops,
                         bool skip_special_tokens)
    : stream_(codec ? codec->stream(skip_special_tokens) : nullptr), stops_(std::move(stops)) {}

std::string TextTracker::advance(const std::vector<int>& new_ids, bool finished,
                                 bool stopped_by_string) {
  ids_.insert(ids_.end(), new_ids.begin(), new_ids.end());
  if (!stream_) return "";
  for (int id : new_ids) text_ += stream_->step(id);
  size_t end = text_.size();
  if (finished) {
    text_ += stream_->finish();
    end = text_.size();
    if (stopped_by_string)
      for (const auto& s : stops_)
        if (!s.empty()) end = std::min(end, text_.find(s));  // npos never wins
  } else {
    // The longest end of the text that a stop string may begin with waits for more text.
    // (The stream's text is whole characters, and a stop string begins with one.)
    size_t hold = 0;
    for (const auto& s : stops_) {
      if (s.empty()) continue;
      for (size_t k = std::min(s.size() - 1, text_.size()); k > hold; --k)
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    }
    end -= hold;
  }
  if (end <= sent_) return "";
  std::string delta = text_.substr(sent_, end - sent_);
  sent_ = end;
  return delta;
}

std::vector<int> encode_prompt(const ServerContext& ctx, const std::string& text,
                               bool add_special_tokens, const std::string& field) {
  if (!ctx.codec)
    throw HttpError(400,
                    fmt::format("this server has no tokenizer (its model directory has no "
                                "tokenizer.json), so '{}' cannot be encoded; start it with "
                                "--tokenizer-path DIR, or send the prompt as token ids",
                                field),
                    field);
  std::vector<int> ids = ctx.codec->encode(text, add_special_tokens);
  const int vocab = ctx.engine.scheduler().runner().config().vocab_size;
  for (int id : ids)
    if (id < 0 || id >= vocab)
      throw HttpError(400,
                      fmt::format("the tokenizer at {} encodes '{}' to token id {}, outside the "
                                  "model's vocabulary (0..{}): the tokenizer is not this model's; "
                                  "start the server with the model's own (--tokenizer-path)",
                                  ctx.codec->source(), field, id, vocab - 1),
                      field);
  return ids;
}

std::vector<std::string> get_stop_strings(const json& obj, const std::string& key) {
  std::vector<std::string> stops = get_string_or_list(obj, key);
  std::erase_if(stops, [](const std::string& s) { return s.empty(); });
  return stops;
}

void client_gone(httplib::Response& res) {
  res.status = 499;  // nginx's "client closed request"
  res.set_content(error_body(499, "the client closed the connection; the request was aborted"),
                  "application/json");
}

bool sse_send(httplib::DataSink& sink, const std::string& payload) {
  const std::string event = "data: " + payload + "\n\n";
  return sink.write(event.data(), event.size());
}

void respond_sse(httplib::Response& res, std::function<void(httplib::DataSink&)> body) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [body = std::move(body)](size_t, httplib::DataSink& sink) {
        // The status line is sent: an error from here on is an event (as OpenAI streams
        // errors), and nothing may escape into cpp-httplib's worker thread.
        try {
          body(sink);
        } catch (const HttpError& e) {
          sse_send(sink, error_body(e.status, e.what(), e.type, e.param));
        } catch (const std::exception& e) {
          sse_send(sink, error_body(500, e.what(), "internal_server_error"));
        }
        sink.done();
        return true;
      });
}

uint64_t fresh_seed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lk(mu);
  return rng();
}

std::string random_id(const std::string& prefix) {
  return fmt::format("{}{:016x}", prefix, fresh_seed());
}

RidRegistry::Registration::Registration(RidRegistry& registry, const std::vector<std::string>& rids,
                                        const std::vector<std::shared_ptr<RequestStream>>& streams)
    : registry_(registry) {
  std::lock_guard<std::mutex> lock(registry_.mu_);
  for (size_t k = 0; k < rids.size() && k < streams.size(); ++k) {
    entries_.emplace_back(rids[k], streams[k]->id());
    registry_.ids_.emplace(rids[k], streams[k]->id());
  }
}

RidRegistry::Registration::~Registration() {
  release();
}

void RidRegistry::Registration::release() {
  std::lock_guard<std::mutex> lock(registry_.mu_);
  for (const auto& [rid, id] : entries_) {
    auto [first, last] = registry_.ids_.equal_range(rid);
    for (auto it = first; it != last; ++it)
      if (it->second == id) {
        registry_.ids_.erase(it);
        break;
      }
  }
  entries_.clear();
}

std::vector<uint64_t> RidRegistry::find(const std::string& rid, bool all) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> out;
  if (all) {
    for (const auto& [r, id] : ids_) out.push_back(id);
    return out;
  }
  auto [first, last] = ids_.equal_range(rid);
  for (auto it = first; it != last; ++it) out.push_back(it->second);
  return out;
}

}  // namespace strata
