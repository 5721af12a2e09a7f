#include "server/reasoning.h"

#include "server/tool_calls.h"

namespace strata {

namespace {

constexpr const char* kThink = "<think>";
constexpr const char* kThinkEnd = "</think>";

bool is_qwen3(const std::string& f) {
  return f == "qwen3" || f == "qwen3-thinking" || f == "qwen3_thinking";
}
bool is_r1(const std::string& f) {
  return f == "deepseek-r1" || f == "deepseek_r1" || f == "deepseek-v3" || f == "deepseek_v3";
}

// Whether `s` is a proper beginning of `marker`.
bool begins(const std::string& s, const std::string& marker) {
  return s.size() < marker.size() && marker.compare(0, s.size(), s) == 0;
}

// The length of the longest end of `s` that begins `marker`.
size_t partial_end(const std::string& s, const std::string& marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k)
    if (s.compare(s.size() - k, k, marker, 0, k) == 0) return k;
  return 0;
}

}  // namespace

bool reasoning_format_known(const std::string& name) {
  return is_qwen3(name) || is_r1(name) || is_harmony_format(name);
}

std::string reasoning_formats() {
  return "qwen3, qwen3-thinking, deepseek-r1, deepseek-v3, gpt-oss";
}

ReasoningSplitter::ReasoningSplitter(const std::string& format) : start_optional_(is_r1(format)) {}

ReasoningSplitter::Parts ReasoningSplitter::feed(const std::string& delta) {
  pending_ += delta;
  return advance(false);
}

ReasoningSplitter::Parts ReasoningSplitter::finish() {
  return advance(true);
}

ReasoningSplitter::Parts ReasoningSplitter::advance(bool final) {
  Parts out;
  if (state_ == State::undecided) {
    const size_t i = pending_.find_first_not_of(" \t\r\n");
    const std::string rest = i == std::string::npos ? "" : pending_.substr(i);
    if (rest.rfind(kThink, 0) == 0) {
      state_ = State::reasoning;
      pending_ = rest.substr(std::char_traits<char>::length(kThink));
    } else if (!final && (rest.empty() || begins(rest, kThink))) {
      return out;  // cannot tell yet
    } else {
      state_ = start_optional_ ? State::reasoning : State::content;
    }
  }
  if (state_ == State::reasoning) {
    const size_t end = pending_.find(kThinkEnd);
    if (end == std::string::npos) {
      const size_t keep = final ? 0 : partial_end(pending_, kThinkEnd);
      out.reasoning = pending_.substr(0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
      return out;
    }
    out.reasoning = pending_.substr(0, end);
    pending_.erase(0, end + std::char_traits<char>::length(kThinkEnd));
    state_ = State::content;
  }
  out.content = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace strata
