#include "server/harmony.h"

#include "server/serving.h"

namespace strata {

namespace {

constexpr const char* kStart = "<|start|>";
constexpr const char* kChannel = "<|channel|>";
constexpr const char* kMessage = "<|message|>";
const char* const kEnds[] = {"<|end|>", "<|call|>", "<|return|>"};

size_t len(const char* s) {
  return std::char_traits<char>::length(s);
}

// The word after `key` in `header` ("to=functions.get_weather" -> "functions.get_weather"),
// ended by whitespace or a special token.
std::string word_after(const std::string& header, const std::string& key) {
  const size_t at = header.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  size_t to = header.find_first_of(" \t\n<", from);
  if (to == std::string::npos) to = header.size();
  return header.substr(from, to - from);
}

}  // namespace

HarmonyAnswer parse_harmony(const std::string& text, bool complete_only) {
  HarmonyAnswer out;
  if (text.find(kMessage) == std::string::npos) {
    // Not (yet) a harmony message: content, unless it is the start of a header.
    if (text.find(kChannel) == std::string::npos && text.find(kStart) == std::string::npos)
      out.content = text;
    return out;
  }
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t body = text.find(kMessage, pos);
    if (body == std::string::npos) break;  // a header still being written
    const std::string header = text.substr(pos, body - pos);
    const size_t from = body + len(kMessage);
    size_t end = std::string::npos, end_len = 0;
    for (const char* e : kEnds) {
      const size_t at = text.find(e, from);
      if (at < end) end = at, end_len = len(e);
    }
    const bool complete = end != std::string::npos;
    const std::string message = text.substr(from, complete ? end - from : std::string::npos);
    std::string channel = word_after(header, kChannel);
    const std::string recipient = word_after(header, "to=");
    if (recipient.rfind("functions.", 0) == 0) {
      if (complete || !complete_only) {
        ToolCall c;
        c.id = random_id("call_");
        c.name = recipient.substr(len("functions."));
        // The model's JSON text, as the other formats give it (tool_calls.h).
        const size_t a = message.find_first_not_of(" \t\r\n");
        c.arguments = a == std::string::npos
                          ? ""
                          : message.substr(a, message.find_last_not_of(" \t\r\n") - a + 1);
        out.calls.push_back(std::move(c));
      }
    } else if (channel == "analysis") {
      out.reasoning += message;
    } else {
      out.content += message;  // final, or a commentary preamble
    }
    if (!complete) break;
    pos = end + end_len;
    if (text.compare(pos, len(kStart), kStart) == 0) pos += len(kStart);
  }
  return out;
}

}  // namespace strata
