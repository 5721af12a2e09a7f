#include "server/tool_calls.h"

#include <fmt/format.h>

#include <optional>

#include "server/serving.h"

namespace strata {

namespace {

constexpr const char* kCallOpen = "<tool_call>";
constexpr const char* kCallClose = "</tool_call>";
constexpr const char* kPythonTag = "<|python_tag|>";

// Arguments keep the order the model wrote them in (as Python's json.dumps does).
using ojson = nlohmann::ordered_json;

bool is_hermes(const std::string& format) {
  return format == "hermes" || format == "qwen25" || format == "qwen";
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

// {"name": ..., "arguments" | "parameters": {...} or a JSON string} -> a call.
std::optional<ToolCall> to_call(const std::string& json_text) {
  const ojson j = ojson::parse(json_text, nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall c;
  c.id = random_id("call_");
  c.name = j["name"].get<std::string>();
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  if (!j.contains(key) || j[key].is_null())
    c.arguments = "{}";
  else if (j[key].is_string())
    c.arguments = j[key].get<std::string>();
  else
    c.arguments = j[key].dump();
  return c;
}

// The end (one past the closing brace) of the JSON object starting at `start`, strings and
// escapes skipped; npos when it does not close.
size_t object_end(const std::string& s, size_t start) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < s.size(); ++i) {
    const char ch = s[i];
    if (in_string) {
      if (ch == '\\')
        ++i;
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '{') {
      ++depth;
    } else if (ch == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return std::string::npos;
}

ParsedAnswer parse_hermes(const std::string& text) {
  size_t pos = text.find(kCallOpen);
  if (pos == std::string::npos) return {text, {}};
  ParsedAnswer out{text.substr(0, pos), {}};
  while (pos != std::string::npos) {
    const size_t body = pos + std::string(kCallOpen).size();
    const size_t close = text.find(kCallClose, body);  // npos: cut off, the rest is the body
    const auto call = to_call(
        trim(text.substr(body, close == std::string::npos ? std::string::npos : close - body)));
    if (!call) return {text, {}};
    out.calls.push_back(*call);
    if (close == std::string::npos) break;
    pos = text.find(kCallOpen, close);
  }
  return out;
}

// Where a llama3 answer's calls begin (after whitespace and <|python_tag|>), or npos when the
// answer is not calls.
size_t llama3_calls_start(const std::string& text) {
  size_t i = text.find_first_not_of(" \t\r\n");
  if (i == std::string::npos) return std::string::npos;
  if (text.compare(i, std::string(kPythonTag).size(), kPythonTag) == 0)
    i = text.find_first_not_of(" \t\r\n", i + std::string(kPythonTag).size());
  return i != std::string::npos && text[i] == '{' ? i : std::string::npos;
}

ParsedAnswer parse_llama3(const std::string& text) {
  size_t i = llama3_calls_start(text);
  if (i == std::string::npos) return {text, {}};
  ParsedAnswer out;
  while (i < text.size()) {
    const size_t end = object_end(text, i);
    if (end == std::string::npos) return {text, {}};
    const auto call = to_call(text.substr(i, end - i));
    if (!call) return {text, {}};
    out.calls.push_back(*call);
    i = text.find_first_not_of(" \t\r\n;", end);
    if (i == std::string::npos) break;
    if (text[i] != '{') return {text, {}};  // text after the calls: not a call answer
  }
  return out;
}

// The length of the longest end of `s` that begins `marker` (text to hold back).
size_t partial_marker(const std::string& s, const std::string& marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k)
    if (s.compare(s.size() - k, k, marker, 0, k) == 0) return k;
  return 0;
}

}  // namespace

bool tool_call_format_known(const std::string& name) {
  return is_hermes(name) || name == "llama3";
}

std::string tool_call_formats() {
  return "hermes, qwen25, qwen, llama3";
}

std::string detect_tool_call_format(const std::string& prompt) {
  if (prompt.find(kCallOpen) != std::string::npos) return "hermes";
  // Llama 3.1/3.2/3.3's templates: "Environment: ipython", and they ask for
  // {"name": function name, "parameters": dictionary of argument name and its value}.
  if (prompt.find("<|python_tag|>") != std::string::npos ||
      prompt.find("Environment: ipython") != std::string::npos ||
      prompt.find("\"parameters\": dictionary of argument name") != std::string::npos)
    return "llama3";
  return "";
}

ParsedAnswer parse_tool_calls(const std::string& format, const std::string& text) {
  if (is_hermes(format)) return parse_hermes(text);
  if (format == "llama3") return parse_llama3(text);
  return {text, {}};
}

std::string ToolCallStream::feed(const std::string& delta) {
  text_ += delta;
  if (in_call_) return "";
  size_t safe = text_.size();
  if (is_hermes(format_)) {
    const size_t pos = text_.find(kCallOpen, sent_ > 0 ? sent_ : 0);
    if (pos != std::string::npos) {
      in_call_ = true;
      safe = pos;
    } else {
      safe = text_.size() - partial_marker(text_, kCallOpen);
    }
  } else if (format_ == "llama3") {
    if (sent_ == 0) {  // undecided: only whitespace, or a beginning of <|python_tag|>, so far
      const size_t i = text_.find_first_not_of(" \t\r\n");
      if (i == std::string::npos) return "";
      const std::string rest = text_.substr(i);
      if (llama3_calls_start(text_) != std::string::npos ||
          rest.compare(0, std::string(kPythonTag).size(), kPythonTag) == 0) {
        in_call_ = true;
        return "";
      }
      if (std::string(kPythonTag).compare(0, rest.size(), rest) == 0) return "";
    }
  }
  std::string out = text_.substr(sent_, safe - sent_);
  sent_ = safe;
  return out;
}

ParsedAnswer ToolCallStream::finish() {
  ParsedAnswer parsed = parse_tool_calls(format_, text_);
  // Without calls the whole text is content, of which the first sent_ bytes went out already;
  // with calls the content is exactly what went out (the text before the first call).
  parsed.content = parsed.calls.empty() ? text_.substr(sent_) : "";
  sent_ = text_.size();
  return parsed;
}

json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
  json out = json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    json c = {{"id", calls[k].id},
              {"type", "function"},
              {"function", {{"name", calls[k].name}, {"arguments", calls[k].arguments}}}};
    if (with_index) c["index"] = k;
    out.push_back(c);
  }
  return out;
}

}  // namespace strata
