#pragma once
// tokenizer.json "model" of type BPE: merges applied lowest rank first (leftmost on ties),
// with byte fallback (<0xNN> tokens), an unknown token (optionally fused) and ignore_merges.
//
// When the pre-tokenizer is ByteLevel, pieces arrive as raw bytes and the vocabulary is
// translated from GPT-2's byte alphabet to raw bytes at load time; otherwise pieces are
// UTF-8 text and symbols start as whole characters.
#include <array>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata::tok {

// Lets unordered_map<std::string, T> be searched with a string_view, without a copy.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  BpeModel(const nlohmann::json& spec, bool byte_level);

  // Appends the ids of one pre-tokenized piece to `out`.
  void encode(std::string_view piece, std::vector<int>& out) const;

  // The token's string as tokenizer.json spells it (what decoders work on), or nullptr.
  const std::string* id_to_token(int id) const;
  // By the tokenizer.json spelling.
  std::optional<int> token_to_id(const std::string& token) const;
  int vocab_size() const { return static_cast<int>(id_to_token_.size()); }
  bool byte_fallback() const { return byte_fallback_; }

 private:
  void merge_symbols(std::vector<int>& symbols) const;
  void initial_symbols(std::string_view piece, std::vector<int>& symbols) const;
  std::optional<int> lookup(std::string_view key) const;

  static uint64_t pair_key(int left, int right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  bool byte_level_;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int unk_id_ = -1;
  StringMap<int> vocab_;    // spelled as the model matches (raw bytes if byte-level)
  StringMap<int> spelled_;  // spelled as in tokenizer.json
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  struct Merge {
    int rank;
    int merged;
  };
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int, 256> byte_token_{};      // byte-level: the single-byte token, or -1
  std::array<int, 256> fallback_token_{};  // <0xNN>, or -1

  // Pieces repeat a lot in real text; their ids are cached (bounded, cleared when full).
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kMaxCachedPiece = 64;
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int>> cache_;
};

}  // namespace strata::tok
