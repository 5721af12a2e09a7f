#include "server/answer_stream.h"

#include "server/harmony.h"

namespace strata {

AnswerStream::AnswerStream(const std::string& reasoning_format, const std::string& tool_format)
    : harmony_(is_harmony_format(reasoning_format) || is_harmony_format(tool_format)),
      tools_(!tool_format.empty()) {
  if (harmony_) return;
  if (!reasoning_format.empty()) reasoning_ = std::make_unique<ReasoningSplitter>(reasoning_format);
  if (tools_) calls_ = std::make_unique<ToolCallStream>(tool_format);
}

AnswerStream::Parts AnswerStream::feed(const std::string& delta) {
  Parts out;
  if (harmony_) {
    text_ += delta;
    // Reasoning and content only grow as text is appended, once a marker that may still be
    // arriving (a trailing "<|..." without its "|>") is held back.
    size_t cut = text_.size();
    const size_t open = text_.rfind("<|");
    if (open != std::string::npos && text_.find("|>", open) == std::string::npos)
      cut = open;
    else if (!text_.empty() && text_.back() == '<')
      cut = text_.size() - 1;
    // The unfinished last call too: its arguments so far are a prefix of its final ones
    // (the message body as it grows, trimmed the same way).
    HarmonyAnswer h = parse_harmony(text_.substr(0, cut), /*complete_only=*/false);
    out.reasoning = h.reasoning.substr(std::min(reasoning_sent_, h.reasoning.size()));
    out.content = h.content.substr(std::min(content_sent_, h.content.size()));
    reasoning_sent_ = std::max(reasoning_sent_, h.reasoning.size());
    content_sent_ = std::max(content_sent_, h.content.size());
    if (tools_) stream_harmony_calls(h.calls, out.call_deltas);
    return out;
  }
  std::string content = delta;
  if (reasoning_) {
    auto p = reasoning_->feed(delta);
    out.reasoning = std::move(p.reasoning);
    content = std::move(p.content);
  }
  if (calls_) {
    out.content = calls_->feed(content);
    out.call_deltas = calls_->take_deltas();
  } else {
    out.content = std::move(content);
  }
  return out;
}

AnswerStream::Parts AnswerStream::finish() {
  Parts out;
  if (harmony_) {
    HarmonyAnswer h = parse_harmony(text_);
    out.reasoning = h.reasoning.substr(std::min(reasoning_sent_, h.reasoning.size()));
    out.content = h.content.substr(std::min(content_sent_, h.content.size()));
    reasoning_sent_ = h.reasoning.size();
    content_sent_ = h.content.size();
    if (tools_) {
      stream_harmony_calls(h.calls, out.call_deltas);
      out.calls = std::move(h.calls);
    }
    return out;
  }
  std::string content;
  if (reasoning_) {
    auto p = reasoning_->finish();
    out.reasoning = std::move(p.reasoning);
    content = std::move(p.content);
  }
  if (calls_) {
    out.content = calls_->feed(content);
    ParsedAnswer a = calls_->finish();
    out.content += a.content;
    out.calls = std::move(a.calls);
    out.call_deltas = calls_->take_deltas();
  } else {
    out.content = std::move(content);
  }
  return out;
}

void AnswerStream::stream_harmony_calls(std::vector<ToolCall>& calls,
                                        std::vector<ToolCallDelta>& deltas) {
  for (size_t k = 0; k < calls.size(); ++k) {
    ToolCall& c = calls[k];
    // A call opens once its header is whole (its <|message|> came): the name is known.
    if (k == harmony_calls_.size()) {
      harmony_calls_.push_back({c.id, 0});
      deltas.push_back({k, true, c.id, c.name, ""});
    }
    StreamedCall& s = harmony_calls_[k];
    c.id = s.id;
    if (c.arguments.size() > s.arguments_sent) {
      deltas.push_back({k, false, "", "", c.arguments.substr(s.arguments_sent)});
      s.arguments_sent = c.arguments.size();
    }
  }
}

AnswerStream::Parts AnswerStream::split(const std::string& reasoning_format,
                                        const std::string& tool_format, const std::string& text) {
  AnswerStream s(reasoning_format, tool_format);
  Parts out = s.feed(text);
  Parts rest = s.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  out.calls = std::move(rest.calls);
  out.call_deltas.insert(out.call_deltas.end(), rest.call_deltas.begin(), rest.call_deltas.end());
  return out;
}

}  // namespace strata
