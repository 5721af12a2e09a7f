#pragma once
// A tokenizer's vocabulary as the grammar sees it: each token's bytes, sorted so that tokens
// sharing a prefix are neighbours (an implicit trie: walking the sorted list and keeping the
// automaton state per prefix length visits each trie edge once, and a prefix the grammar
// refuses skips every token below it). Built once per tokenizer and shared by every grammar.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tok {
class Tokenizer;
}

namespace strata::grammar {

class TokenVocabulary {
 public:
  // bytes[id]: what token `id` emits, or nullopt for a token no grammar may choose (special
  // and control tokens; stop tokens are allowed separately, once the grammar accepts).
  explicit TokenVocabulary(std::vector<std::optional<std::string>> bytes);
  // Byte-level BPE (GPT-2 alphabet), SentencePiece-style (▁ for space, <0xNN> byte
  // fallback) and added non-special tokens.
  static std::shared_ptr<const TokenVocabulary> from_tokenizer(const tok::Tokenizer& tokenizer);

  int size() const { return static_cast<int>(bytes_.size()); }
  const std::string& bytes(int id) const { return bytes_[id]; }
  bool usable(int id) const { return usable_[id]; }
  // Usable ids in byte order, and lcp[k]: common prefix length of sorted[k-1] and sorted[k].
  const std::vector<int>& sorted() const { return sorted_; }
  const std::vector<uint32_t>& lcp() const { return lcp_; }
  size_t max_length() const { return max_length_; }
  // The first sorted index after k whose token does not start with sorted[k]'s first d + 1
  // bytes (d < its length): skipping a refused prefix is one lookup, not a scan.
  uint32_t subtree_end(size_t k, size_t d) const { return subtree_end_[end_offset_[k] + d]; }
  // The bytes of sorted()[k], from one buffer in sorted order (the walks read it in order).
  std::string_view sorted_bytes(size_t k) const {
    return std::string_view(sorted_bytes_)
        .substr(end_offset_[k], end_offset_[k + 1] - end_offset_[k]);
  }

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> usable_;
  std::vector<int> sorted_;
  std::vector<uint32_t> lcp_;
  size_t max_length_ = 0;
  // Per sorted index (and one past the end): where its bytes start in sorted_bytes_, which is
  // also where its row of subtree_end_ starts.
  std::vector<uint32_t> end_offset_;
  std::string sorted_bytes_;
  std::vector<uint32_t> subtree_end_;  // one entry per byte of every token
};

}  // namespace strata::grammar
