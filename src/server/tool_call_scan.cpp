#include "server/tool_call_scan.h"

#include <string_view>

#include "model/json_util.h"

namespace strata {

namespace {

constexpr const char* kSpace = " \t\r\n";
constexpr size_t npos = std::string::npos;

size_t len(const char* s) {
  return std::char_traits<char>::length(s);
}

// The first non-space at or after i (s.size() when none yet).
size_t skip_space(std::string_view s, size_t i) {
  const size_t j = s.find_first_not_of(kSpace, i);
  return j == npos ? s.size() : j;
}

// One past the closing quote of the string opening at `start`; npos while it is open.
size_t string_end(std::string_view s, size_t start) {
  for (size_t i = start + 1; i < s.size(); ++i) {
    if (s[i] == '\\')
      ++i;
    else if (s[i] == '"')
      return i + 1;
  }
  return npos;
}

size_t value_end(std::string_view s, size_t start) {
  if (start >= s.size()) return npos;
  const char c = s[start];
  if (c == '"') return string_end(s, start);
  if (c == '{' || c == '[') {
    int depth = 0;
    for (size_t i = start; i < s.size(); ++i) {
      const char ch = s[i];
      if (ch == '"') {
        const size_t e = string_end(s, i);
        if (e == npos) return npos;
        i = e - 1;
      } else if (ch == '{' || ch == '[') {
        ++depth;
      } else if ((ch == '}' || ch == ']') && --depth == 0) {
        return i + 1;
      }
    }
    return npos;
  }
  // A literal (number, true, false, null) ends at the delimiter after it.
  return s.find_first_of(",}] \t\r\n", start);
}

// The arguments' bytes arrived within s.
void count_arrived(std::string_view s, CallSpan& c) {
  if (c.args_object && c.args_begin != npos)
    c.args_arrived = (c.args_end == npos ? s.size() : c.args_end) - c.args_begin;
}

// A JSON string literal's value (nlohmann decodes its escapes).
std::optional<std::string> string_at(std::string_view s, size_t b, size_t e) {
  const json j = json::parse(s.begin() + b, s.begin() + e, nullptr, false);
  if (!j.is_string()) return std::nullopt;
  return j.get<std::string>();
}

CallSpan scan_object(std::string_view s, size_t start) {
  CallSpan c;
  c.begin = start;
  c.object = true;
  size_t i = skip_space(s, start + 1);
  while (i < s.size()) {
    if (s[i] == '}') {
      c.closed = true;
      c.end = i + 1;
      return c;
    }
    if (s[i] != '"') return c;  // not an object's key: it never closes
    const size_t key_end = string_end(s, i);
    if (key_end == npos) return c;
    const auto key = string_at(s, i, key_end);
    i = skip_space(s, key_end);
    if (!key || i >= s.size() || s[i] != ':') return c;
    const size_t v = skip_space(s, i + 1);
    if (v >= s.size()) return c;
    const bool args = (*key == "arguments" || *key == "parameters") && c.args_begin == npos;
    if (args) {
      c.args_begin = v;
      c.args_object = s[v] == '{';
    }
    const size_t e = value_end(s, v);
    if (args) c.args_end = e;
    count_arrived(s, c);
    if (e == npos) return c;
    if (*key == "name" && !c.name) c.name = string_at(s, v, e);
    i = skip_space(s, e);
    if (i < s.size() && s[i] == ',')
      i = skip_space(s, i + 1);
    else if (i < s.size() && s[i] != '}')
      return c;
  }
  return c;
}

std::string trim(std::string_view s) {
  const size_t a = s.find_first_not_of(kSpace);
  if (a == npos) return "";
  return std::string(s.substr(a, s.find_last_not_of(kSpace) - a + 1));
}

// The arguments value from `v` on, within s.
void scan_arguments(std::string_view s, size_t v, CallSpan& c) {
  if (v >= s.size()) return;
  c.args_begin = v;
  c.args_object = s[v] == '{';
  c.args_end = value_end(s, v);
  count_arrived(s, c);
}

std::vector<CallSpan> scan_hermes(std::string_view text) {
  std::vector<CallSpan> out;
  size_t pos = text.find(kCallOpen);
  while (pos != npos) {
    const size_t body = pos + len(kCallOpen);
    const size_t close = text.find(kCallClose, body);
    const std::string_view block = text.substr(0, close);  // the object ends by the close tag
    const size_t brace = skip_space(block, body);
    CallSpan c;
    if (brace < block.size() && block[brace] == '{') c = scan_object(block, brace);
    c.begin = brace;
    c.closed = close != npos;
    c.end = close == npos ? npos : close + len(kCallClose);
    out.push_back(std::move(c));
    if (close == npos) break;
    pos = text.find(kCallOpen, close);
  }
  return out;
}

std::vector<CallSpan> scan_llama3(std::string_view text) {
  std::vector<CallSpan> out;
  size_t i = llama3_calls_start(std::string(text));
  while (i != npos && i < text.size() && text[i] == '{') {
    out.push_back(scan_object(text, i));
    if (!out.back().closed) break;
    i = text.find_first_not_of(" \t\r\n;", out.back().end);
  }
  return out;
}

// DeepSeek-V3: <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{args}\n```; V3.1:
// <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{args}; each ended by <｜tool▁call▁end｜>. What follows
// the separator tells them apart: the arguments' '{' (V3.1) or the name (V3).
std::vector<CallSpan> scan_deepseek(std::string_view text) {
  std::vector<CallSpan> out;
  const size_t begin = text.find(kDsCallsBegin);
  if (begin == npos) return out;
  size_t pos = text.find(kDsCallBegin, begin);
  while (pos != npos) {
    const size_t body = pos + len(kDsCallBegin);
    const size_t end = text.find(kDsCallEnd, body);
    const std::string_view call = text.substr(0, end);
    CallSpan c;
    c.begin = body;
    c.closed = end != npos;
    c.end = end == npos ? npos : end + len(kDsCallEnd);
    const size_t sep = call.find(kDsSep, body);
    if (sep != npos) {
      const size_t after = sep + len(kDsSep);
      const size_t first = skip_space(call, after);
      if (first < call.size() && call[first] == '{') {
        c.name = trim(call.substr(body, sep - body));
        scan_arguments(call, first, c);
      } else if (const size_t fence = call.find("```json", after); fence != npos) {
        c.name = trim(call.substr(after, fence - after));
        scan_arguments(call, skip_space(call, fence + len("```json")), c);
      }
    }
    out.push_back(std::move(c));
    if (end == npos) break;
    pos = text.find(kDsCallBegin, end);
  }
  return out;
}

// Mistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (tokenizer v3), or per call
// [TOOL_CALLS]NAME[ARGS]{...} (v11 and later: the name is whole at [ARGS]).
std::vector<CallSpan> scan_mistral(std::string_view text) {
  std::vector<CallSpan> out;
  size_t pos = text.find(kMistralCalls);
  if (pos == npos) return out;
  const size_t first = skip_space(text, pos + len(kMistralCalls));
  if (first < text.size() && text[first] == '[') {
    size_t i = skip_space(text, first + 1);
    while (i < text.size() && text[i] == '{') {
      out.push_back(scan_object(text, i));
      if (!out.back().closed) break;
      i = skip_space(text, out.back().end);
      if (i >= text.size() || text[i] != ',') break;
      i = skip_space(text, i + 1);
    }
    return out;
  }
  while (pos != npos) {
    const size_t start = pos + len(kMistralCalls);
    const size_t next = text.find(kMistralCalls, start);
    const std::string_view call = text.substr(0, next);
    CallSpan c;
    c.begin = start;
    c.closed = next != npos;
    c.end = next;
    if (const size_t args = call.find(kMistralArgs, start); args != npos) {
      std::string_view name = call.substr(start, args - start);
      if (const size_t id = name.find(kMistralCallId); id != npos) {
        c.id = trim(name.substr(id + len(kMistralCallId)));
        name = name.substr(0, id);
      }
      c.name = trim(name);
      scan_arguments(call, skip_space(call, args + len(kMistralArgs)), c);
    }
    out.push_back(std::move(c));
    pos = next;
  }
  return out;
}

}  // namespace

size_t llama3_calls_start(const std::string& text) {
  size_t i = text.find_first_not_of(kSpace);
  if (i == npos) return npos;
  if (text.compare(i, len(kPythonTag), kPythonTag) == 0)
    i = text.find_first_not_of(kSpace, i + len(kPythonTag));
  return i != npos && text[i] == '{' ? i : npos;
}

size_t json_value_end(const std::string& s, size_t start) {
  return value_end(s, start);
}

CallSpan scan_call_object(const std::string& s, size_t start, size_t limit) {
  return scan_object(std::string_view(s).substr(0, limit), start);
}

std::vector<CallSpan> scan_calls(const std::string& format, const std::string& text) {
  if (is_hermes(format)) return scan_hermes(text);
  if (is_llama3(format)) return scan_llama3(text);
  if (is_deepseek(format)) return scan_deepseek(text);
  if (format == "mistral") return scan_mistral(text);
  return {};
}

}  // namespace strata
