#include "server/tool_calls.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <optional>
#include <utility>

#include "server/harmony.h"
#include "server/serving.h"
#include "server/tool_call_scan.h"

namespace strata {

namespace {

// Arguments are the model's own JSON text (trimmed), so that the fragments a stream sends as
// they arrive join to the whole answer's arguments; nlohmann-json checks that they parse.
using ojson = nlohmann::ordered_json;

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

// A call from its span (tool_call_scan.h) and the JSON text of its whole object ({"name": ...,
// "arguments" | "parameters": ...}; empty for formats that write the name outside an object).
std::optional<ToolCall> to_call(const std::string& text, const CallSpan& span,
                                const std::string& object_text) {
  if (!object_text.empty() && !ojson::parse(object_text, nullptr, false).is_object())
    return std::nullopt;
  if (!span.name || span.name->empty()) return std::nullopt;
  ToolCall c;
  c.id = span.id && !span.id->empty() ? *span.id : random_id("call_");
  c.name = *span.name;
  if (span.args_begin == std::string::npos) {
    if (object_text.empty()) return std::nullopt;  // a marker format's call has arguments
    c.arguments = "{}";
    return c;
  }
  if (span.args_end == std::string::npos) return std::nullopt;
  const std::string raw = text.substr(span.args_begin, span.args_end - span.args_begin);
  const ojson args = ojson::parse(raw, nullptr, false);
  if (object_text.empty() && !args.is_object()) return std::nullopt;
  if (args.is_discarded()) return std::nullopt;
  if (args.is_null())
    c.arguments = "{}";
  else if (args.is_string())
    c.arguments = args.get<std::string>();
  else
    c.arguments = raw;
  return c;
}

// The calls of an answer, from its spans; none (the whole text is content) when one does not
// parse, or when text that is not a call follows them where the format allows none.
std::vector<ToolCall> calls_of(const std::string& format, const std::string& text) {
  const std::vector<CallSpan> spans = scan_calls(format, text);
  if (spans.empty()) return {};
  const bool objects = is_hermes(format) || is_llama3(format) || spans[0].object;
  std::vector<ToolCall> out;
  for (const CallSpan& s : spans) {
    if (objects != s.object) return {};
    std::string object;
    if (objects) {
      if (!s.closed && !is_hermes(format)) return {};  // hermes: a cut-off block is the rest
      // hermes: the whole block, trimmed (nothing else may share it); others: the object.
      const size_t to = !is_hermes(format) ? s.end
                        : s.closed         ? text.rfind(kCallClose, s.end)
                                           : text.size();
      object = trim(text.substr(s.begin, to - s.begin));
    }
    auto call = to_call(text, s, object);
    if (!call) return {};
    out.push_back(std::move(*call));
  }
  const CallSpan& last = spans.back();
  if (is_llama3(format) && text.find_first_not_of(" \t\r\n;", last.end) != std::string::npos)
    return {};                           // text after the calls: not a call answer
  if (format == "mistral" && objects) {  // [TOOL_CALLS][...]: the list ends after the last call
    const size_t after = text.find_first_not_of(" \t\r\n", last.end);
    if (after == std::string::npos || text[after] != ']') return {};
  }
  return out;
}

// Where the content ends and the calls begin (npos: no calls).
size_t calls_begin(const std::string& format, const std::string& text) {
  if (is_llama3(format))
    return llama3_calls_start(text) == std::string::npos ? std::string::npos : 0;
  const std::string marker = call_marker(format);
  return marker.empty() ? std::string::npos : text.find(marker);
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
  if (is_harmony_format(format)) {
    HarmonyAnswer h = parse_harmony(text);
    return {std::move(h.content), std::move(h.calls)};
  }
  const size_t begin = calls_begin(format, text);
  if (begin == std::string::npos) return {text, {}};
  std::vector<ToolCall> calls = calls_of(format, text);
  if (calls.empty()) return {text, {}};
  return {text.substr(0, begin), std::move(calls)};
}

std::string ToolCallStream::feed(const std::string& delta) {
  text_ += delta;
  if (in_call_) {
    stream_calls();
    return "";
  }
  size_t safe = text_.size();
  if (const std::string marker = call_marker(format_); !marker.empty()) {
    const size_t pos = text_.find(marker, sent_ > 0 ? sent_ : 0);
    if (pos != std::string::npos) {
      in_call_ = true;
      safe = pos;
      stream_calls();
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
        stream_calls();
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
  // Calls streamed keep their ids and get the bytes not sent yet; the others go out whole.
  // Calls whose fragments went out but that turn out malformed cannot be taken back (as in
  // vLLM): the client got deltas of a call the final answer does not have.
  for (size_t k = 0; k < parsed.calls.size(); ++k) {
    ToolCall& c = parsed.calls[k];
    if (k >= streamed_.size()) {
      deltas_.push_back({k, true, c.id, c.name, c.arguments});
      continue;
    }
    c.id = streamed_[k].id;
    const size_t sent = streamed_[k].arguments_sent;
    if (c.arguments.size() > sent) deltas_.push_back({k, false, "", "", c.arguments.substr(sent)});
  }
  return parsed;
}

void ToolCallStream::stream_calls() {
  const std::vector<CallSpan> spans = scan_calls(format_, text_);
  for (size_t k = 0; k < spans.size(); ++k) {
    const CallSpan& s = spans[k];
    if (k == streamed_.size()) {  // opens once its name is whole
      if (!s.name || s.name->empty()) return;
      streamed_.push_back({s.id && !s.id->empty() ? *s.id : random_id("call_"), 0});
      deltas_.push_back({k, true, streamed_[k].id, *s.name, ""});
    }
    StreamedCall& c = streamed_[k];
    if (s.args_arrived > c.arguments_sent) {
      deltas_.push_back(
          {k, false, "", "",
           text_.substr(s.args_begin + c.arguments_sent, s.args_arrived - c.arguments_sent)});
      c.arguments_sent = s.args_arrived;
    }
  }
}

std::vector<ToolCallDelta> ToolCallStream::take_deltas() {
  return std::exchange(deltas_, {});
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

std::vector<ToolCallDelta> whole_call_deltas(const std::vector<ToolCall>& calls) {
  std::vector<ToolCallDelta> out;
  for (size_t k = 0; k < calls.size(); ++k)
    out.push_back({k, true, calls[k].id, calls[k].name, calls[k].arguments});
  return out;
}

json tool_call_delta_json(const ToolCallDelta& d) {
  json c = {{"index", d.index}, {"function", {{"arguments", d.arguments}}}};
  if (d.opens) {
    c["id"] = d.id;
    c["type"] = "function";
    c["function"]["name"] = d.name;
  }
  return c;
}

}  // namespace strata
