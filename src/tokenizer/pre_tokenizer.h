#pragma once
// tokenizer.json "pre_tokenizer": splits normalized text into the pieces the model encodes
// one by one. Supported: Split (String or Regex pattern, every behavior, invert), Digits,
// ByteLevel and Sequence of them.
//
// ByteLevel does two things in Hugging Face: an optional GPT-2 regex split (use_regex) and the
// mapping of each byte to a printable character. strata keeps pieces as raw bytes and instead
// maps the *vocabulary* to raw bytes once at load time (see BpeModel), which is equivalent and
// saves a conversion per piece; so here ByteLevel only splits and reports `byte_level()`.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace strata::tok {

class PreTokenizeStep {
 public:
  virtual ~PreTokenizeStep() = default;
  // Replaces each piece with the pieces it splits into (never empty ones).
  virtual void split(std::vector<std::string>& pieces) const = 0;
};

class PreTokenizer {
 public:
  // A JSON null gives the identity (the whole text is one piece).
  explicit PreTokenizer(const nlohmann::json& spec);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;

  std::vector<std::string> pre_tokenize(const std::string& text) const;
  bool byte_level() const { return byte_level_; }

 private:
  void add(const nlohmann::json& spec, bool last);
  std::vector<std::unique_ptr<PreTokenizeStep>> steps_;
  bool byte_level_ = false;
};

}  // namespace strata::tok
