// libFuzzer target: tokenizer.json loading and encoding. Input: a tokenizer.json, then a NUL
// byte, then text to encode (with and without special tokens) and decode again. Without a NUL
// the input is text for the vendored tiny ChatML tokenizer (STRATA_FUZZ_TOKENIZER names it).
// Anything but a strata Error is a bug.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/error.h"
#include "model/json_util.h"
#include "tokenizer/tokenizer.h"

namespace {

const strata::tok::Tokenizer* fixed_tokenizer() {
  static std::unique_ptr<strata::tok::Tokenizer> t = [] {
    const char* path = std::getenv("STRATA_FUZZ_TOKENIZER");
    return path ? std::make_unique<strata::tok::Tokenizer>(strata::tok::Tokenizer::load(path))
                : nullptr;
  }();
  return t.get();
}

void round_trip(const strata::tok::Tokenizer& t, const std::string& text) {
  for (bool special : {false, true}) {
    const std::vector<int> ids = t.encode(text, special);
    for (int id : ids)
      if (id < 0 || id >= t.vocab_size()) __builtin_trap();
    (void)t.decode(ids, special);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  try {
    const size_t nul = input.find('\0');
    if (nul == std::string::npos) {
      if (const auto* t = fixed_tokenizer()) round_trip(*t, input);
      return 0;
    }
    const strata::json spec = strata::parse_json_lenient(input.substr(0, nul), "tokenizer.json");
    const strata::tok::Tokenizer t(spec, "tokenizer.json");
    round_trip(t, input.substr(nul + 1));
  } catch (const strata::Error&) {
  }
  return 0;
}
