#pragma once
// A compiled Unicode regex (PCRE2, UTF + UCP, JIT when available) for the patterns in
// tokenizer.json. Hugging Face runs them with Oniguruma, whose \s is Unicode White_Space;
// PCRE2's \s also takes U+180E, so \s and \S are rewritten into explicit classes first.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::tok {

class Regex {
 public:
  // `what` names the pattern's place in error messages ("pre_tokenizer Split").
  Regex(const std::string& pattern, const std::string& what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches [begin, end) in `text`, which must be valid UTF-8.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

  // Escapes `literal` so that it matches itself.
  static std::string escape(std::string_view literal);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::tok
