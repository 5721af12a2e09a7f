#include "server/tool_calls.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <optional>

#include "server/harmony.h"
#include "server/serving.h"

namespace strata {

namespace {

constexpr const char* kCallOpen = "<tool_call>";
constexpr const char* kCallClose = "</tool_call>";
constexpr const char* kPythonTag = "<|python_tag|>";
// DeepSeek-V3's (and R1's, V3.1's) tool-call tokens.
constexpr const char* kDsCallsBegin = "<\uff5ctool\u2581calls\u2581begin\uff5c>";
constexpr const char* kDsCallBegin = "<\uff5ctool\u2581call\u2581begin\uff5c>";
constexpr const char* kDsCallEnd = "<\uff5ctool\u2581call\u2581end\uff5c>";
constexpr const char* kDsSep = "<\uff5ctool\u2581sep\uff5c>";
// Mistral's control tokens (kept in the text: the server decodes these answers with
// special tokens).
constexpr const char* kMistralCalls = "[TOOL_CALLS]";
constexpr const char* kMistralArgs = "[ARGS]";
constexpr const char* kMistralCallId = "[CALL_ID]";  // Mistral Small 3.2: NAME[CALL_ID]ID[ARGS]

// Arguments keep the order the model wrote them in (as Python's json.dumps does).
using ojson = nlohmann::ordered_json;

bool is_hermes(const std::string& format) {
  return format == "hermes" || format == "qwen25" || format == "qwen";
}
bool is_llama3(const std::string& format) {
  return format == "llama3" || format == "llama3_json" || format == "llama4";
}
bool is_deepseek(const std::string& format) {
  return format == "deepseekv3" || format == "deepseek_v3" || format == "deepseekv31" ||
         format == "deepseek_v31";
}

// Where a format's calls begin: they are the rest of the answer from there (npos: none).
// Llama 3's answer is calls or not as a whole, decided by its first character.
std::string call_marker(const std::string& format) {
  if (is_hermes(format)) return kCallOpen;
  if (is_deepseek(format)) return kDsCallsBegin;
  if (format == "mistral") return kMistralCalls;
  return "";
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

// DeepSeek-V3: <｜tool▁calls▁begin｜> then per call <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
// \n```json\n{args}\n```<｜tool▁call▁end｜>; V3.1 writes
// <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{args} <｜tool▁call▁end｜>. Both are read.
ParsedAnswer parse_deepseek(const std::string& text) {
  const size_t begin = text.find(kDsCallsBegin);
  if (begin == std::string::npos) return {text, {}};
  ParsedAnswer out{text.substr(0, begin), {}};
  size_t pos = text.find(kDsCallBegin, begin);
  if (pos == std::string::npos) return {text, {}};
  while (pos != std::string::npos) {
    const size_t body = pos + std::string(kDsCallBegin).size();
    const size_t end = text.find(kDsCallEnd, body);
    const std::string call =
        text.substr(body, end == std::string::npos ? std::string::npos : end - body);
    const size_t sep = call.find(kDsSep);
    if (sep == std::string::npos) return {text, {}};
    const std::string left = trim(call.substr(0, sep));
    std::string right = call.substr(sep + std::string(kDsSep).size());
    ToolCall c;
    c.id = random_id("call_");
    const size_t fence = right.find("```json");
    if (fence != std::string::npos) {  // V3: NAME\n```json\n{...}\n```
      c.name = trim(right.substr(0, fence));
      right = right.substr(fence + 7);
      const size_t close = right.rfind("```");
      if (close != std::string::npos) right = right.substr(0, close);
    } else {  // V3.1: the name before the separator
      c.name = left;
    }
    const ojson args = ojson::parse(trim(right), nullptr, false);
    if (c.name.empty() || !args.is_object()) return {text, {}};
    c.arguments = args.dump();
    out.calls.push_back(std::move(c));
    if (end == std::string::npos) break;
    pos = text.find(kDsCallBegin, end);
  }
  return out;
}

// Mistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (tokenizer v3), or per call
// [TOOL_CALLS]NAME[ARGS]{...} (v11 and later).
ParsedAnswer parse_mistral(const std::string& text) {
  size_t pos = text.find(kMistralCalls);
  if (pos == std::string::npos) return {text, {}};
  ParsedAnswer out{text.substr(0, pos), {}};
  const size_t marker = std::string(kMistralCalls).size();
  const std::string first = trim(text.substr(pos + marker));
  if (!first.empty() && first[0] == '[') {
    const ojson list = ojson::parse(first.substr(0, first.rfind(']') + 1), nullptr, false);
    if (!list.is_array() || list.empty()) return {text, {}};
    for (const auto& item : list) {
      const auto call = to_call(item.dump());
      if (!call) return {text, {}};
      out.calls.push_back(*call);
    }
    return out;
  }
  while (pos != std::string::npos) {
    const size_t start = pos + marker;
    const size_t next = text.find(kMistralCalls, start);
    const std::string one =
        text.substr(start, next == std::string::npos ? std::string::npos : next - start);
    const size_t args = one.find(kMistralArgs);
    if (args == std::string::npos) return {text, {}};
    ToolCall c;
    c.id = random_id("call_");
    c.name = trim(one.substr(0, args));
    if (const size_t id = c.name.find(kMistralCallId); id != std::string::npos) {
      c.id = trim(c.name.substr(id + std::string(kMistralCallId).size()));
      c.name = trim(c.name.substr(0, id));
    }
    const std::string rest = trim(one.substr(args + std::string(kMistralArgs).size()));
    const size_t end = rest.empty() || rest[0] != '{' ? std::string::npos : object_end(rest, 0);
    const ojson a =
        end == std::string::npos ? ojson() : ojson::parse(rest.substr(0, end), nullptr, false);
    if (c.name.empty() || !a.is_object()) return {text, {}};
    c.arguments = a.dump();
    out.calls.push_back(std::move(c));
    pos = next;
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
  return is_hermes(name) || is_llama3(name) || is_deepseek(name) || name == "mistral" ||
         is_harmony_format(name);
}

std::string tool_call_formats() {
  return "hermes, qwen25, qwen, llama3, llama3_json, llama4, deepseekv3, deepseek_v3, "
         "deepseekv31, mistral, gpt-oss, openai";
}

bool is_harmony_format(const std::string& name) {
  return name == "gpt-oss" || name == "gpt_oss" || name == "openai" || name == "harmony";
}

bool keeps_special_tokens(const std::string& format) {
  return format == "mistral" || is_harmony_format(format);
}

namespace {

// Hermes/Qwen's prompts show a call as `<tool_call>` then a JSON object ({"name": ...}); other
// families write `<tool_call>` around XML (Qwen3-Coder's <function=...>, GLM's <arg_key>,
// MiniMax's <invoke>), which the hermes parser does not read.
bool shows_hermes_json_call(const std::string& prompt) {
  for (size_t at = prompt.find(kCallOpen); at != std::string::npos;
       at = prompt.find(kCallOpen, at + 1)) {
    size_t i = at + std::strlen(kCallOpen);
    while (i < prompt.size() && std::isspace(static_cast<unsigned char>(prompt[i]))) ++i;
    if (prompt.compare(i, 2, "{\"") == 0) return true;
  }
  return false;
}

}  // namespace

std::string detect_tool_call_format(const std::string& prompt) {
  if (shows_hermes_json_call(prompt)) return "hermes";
  if (prompt.find(kDsCallsBegin) != std::string::npos || prompt.find(kDsSep) != std::string::npos)
    return "deepseekv3";
  // gpt-oss's harmony prompt: a developer message declaring `namespace functions` (the prompt
  // ends with `<|start|>assistant`, before any <|channel|>).
  if (prompt.find("<|start|>") != std::string::npos &&
      prompt.find("namespace functions") != std::string::npos)
    return "gpt-oss";
  if (prompt.find("[AVAILABLE_TOOLS]") != std::string::npos) return "mistral";
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
  if (is_llama3(format)) return parse_llama3(text);
  if (is_deepseek(format)) return parse_deepseek(text);
  if (format == "mistral") return parse_mistral(text);
  if (is_harmony_format(format)) {
    HarmonyAnswer h = parse_harmony(text);
    return {std::move(h.content), std::move(h.calls)};
  }
  return {text, {}};
}

std::string ToolCallStream::feed(const std::string& delta) {
  text_ += delta;
  if (in_call_) return "";
  size_t safe = text_.size();
  if (const std::string marker = call_marker(format_); !marker.empty()) {
    const size_t pos = text_.find(marker, sent_ > 0 ? sent_ : 0);
    if (pos != std::string::npos) {
      in_call_ = true;
      safe = pos;
    } else {
      safe = text_.size() - partial_marker(text_, marker);
    }
  } else if (is_llama3(format_)) {
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
