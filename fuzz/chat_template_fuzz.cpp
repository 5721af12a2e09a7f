// libFuzzer target: the Jinja2 chat-template engine. Input: a template, then a NUL byte, then
// the messages as JSON (a fixed conversation when missing or not a list). Rendering runs with
// the generation prompt on and off. Anything but a strata Error is a bug.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source = input.substr(0, nul);
  nlohmann::ordered_json messages =
      nlohmann::ordered_json::array({{{"role", "system"}, {"content", "Be brief."}},
                                     {{"role", "user"}, {"content", "Hi!"}},
                                     {{"role", "assistant"}, {"content", "Hello."}},
                                     {{"role", "user"}, {"content", "What now?"}}});
  if (nul != std::string::npos) {
    auto given = nlohmann::ordered_json::parse(input.substr(nul + 1), nullptr, false);
    if (given.is_array()) messages = std::move(given);
  }
  try {
    const nlohmann::json config = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
    const strata::tok::ChatTemplate chat(source, config);
    for (bool open : {true, false}) (void)chat.render(messages, open);
  } catch (const strata::Error&) {
  }
  return 0;
}
