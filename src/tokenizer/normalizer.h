#pragma once
// tokenizer.json "normalizer": NFC/NFD/NFKC/NFKD, Lowercase, Strip, Prepend, Replace and
// Sequence of them. Each works on whole UTF-8 strings (offsets are not tracked: strata needs
// ids, and decoding goes through the decoder, not through offsets).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace strata::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// nullptr for a JSON null; an Error naming the component for an unsupported type.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec);

}  // namespace strata::tok
