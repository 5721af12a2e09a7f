#pragma once
// tokenizer.json "decoder": turns token strings back into text. Like Hugging Face, each
// decoder maps a list of token strings to a new list (decode_chain) and the final list is
// concatenated. Supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Sequence.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace strata::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for a JSON null (tokens are then joined with spaces, as HF does).
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec);

std::string run_decoder(const Decoder* decoder, std::vector<std::string> tokens);

}  // namespace strata::tok
