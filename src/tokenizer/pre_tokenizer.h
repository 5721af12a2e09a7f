#pragma once
// tokenizer.json "pre_tokenizer": splits normalized text into the pieces the model encodes
// one by one. Supported: Split (String or Regex pattern, every behavior, invert), Digits,
// ByteLevel and Sequence of them.
//
// ByteLevel does two things in Hugging Face: an optional GPT-2 regex split (use_regex) and the
// mapping of each byte to a printable character. strata keeps pieces as raw bytes and instead
// maps the *vocabulary* to raw bytes once at load time (see BpeModel), which is equivalent and
// saves a conversion per piece; so here ByteLevel only splits and reports `byte_level()`.
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tok {

// Pieces are views into the text being encoded; a step that has to make new strings keeps
// them in `storage` (a deque, so views stay valid as it grows).
struct Pieces {
  std::vector<std::string_view> views;
  std::deque<std::string> storage;
};

class PreTokenizeStep {
 public:
  virtual ~PreTokenizeStep() = default;
  // Replaces each piece with the pieces it splits into (never empty ones).
  virtual void split(Pieces& pieces) const = 0;
};

class PreTokenizer {
 public:
  // A JSON null gives the identity (the whole text is one piece).
  explicit PreTokenizer(const nlohmann::json& spec);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;

  // The pieces of `text` (which must outlive them) in `out`.
  void pre_tokenize(std::string_view text, Pieces& out) const;
  bool byte_level() const { return byte_level_; }

 private:
  void add(const nlohmann::json& spec, bool last);
  std::vector<std::unique_ptr<PreTokenizeStep>> steps_;
  bool byte_level_ = false;
};

}  // namespace strata::tok
