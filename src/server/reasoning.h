#pragma once
// The reasoning of models that think before they answer, split from the answer's text as
// SGLang's and vLLM's --reasoning-parser do, into OpenAI-compatible `reasoning_content`:
//   qwen3 (= qwen3-thinking): an answer that begins with <think> reasons until </think>; one
//     that does not (thinking turned off, the template wrote an empty think block) is all
//     content.
//   deepseek-r1 (= deepseek_r1, deepseek-v3): the answer reasons from its start (the template
//     usually wrote <think> into the prompt; a leading <think> is dropped) until </think>.
//     Without </think> it is all reasoning (cut off while thinking).
//   gpt-oss: the analysis channel (harmony.h; answer_stream.h reads it).
// The text after </think> is content as written (vLLM's). The split is made as text arrives:
// what may begin a marker is held back, so a stream's pieces join to the whole answer's.
#include <string>

namespace strata {

bool reasoning_format_known(const std::string& name);
std::string reasoning_formats();  // for messages

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(const std::string& format);
  struct Parts {
    std::string reasoning, content;
  };
  Parts feed(const std::string& delta);
  Parts finish();  // what was held back

 private:
  enum class State { undecided, reasoning, content };
  Parts advance(bool final);
  bool start_optional_ = false;  // deepseek-r1: reasoning even without <think>
  State state_ = State::undecided;
  std::string pending_;  // text not yet given out
};

}  // namespace strata
