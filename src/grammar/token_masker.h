#pragma once
// Allowed-token masks of grammar states, computed without walking the vocabulary per step.
//
// Two caches (ideas from xgrammar's adaptive token mask cache):
//  1. Per top of stack (the byte element on top and the few frames below it, kFrameDepth): the
//     vocabulary is walked once, as a trie, from a stack holding only those frames. A token whose
//     bytes all fit inside those frames is accepted whatever lies below it on the stack
//     (context-independent, stored as a bitmask); one that runs past their end is "uncertain" and
//     is checked at mask time against the real stack; any other is rejected. For JSON the uncertain
//     tokens are the few that close a string or number and go on.
//  2. Per whole state (the sorted set of stack nodes): the finished mask, bounded. Decoding
//     revisits the same states (every character of a string value is the same state), so
//     most steps are one lookup and a copy.
// Stop tokens are not the masker's business: the caller allows them when the state accepts.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/stack_forest.h"
#include "grammar/token_vocabulary.h"

namespace strata::grammar {

class TokenMasker {
 public:
  TokenMasker(StackForest& forest, std::shared_ptr<const TokenVocabulary> vocabulary);

  // Sets bit t % 32 of words[t / 32] for every token allowed after `state` (other bits of
  // `words` are cleared); words.size() >= (vocabulary size + 31) / 32.
  void fill_mask(const NodeSet& state, std::span<uint32_t> words);
  // Whether `bytes` can be consumed from `state` (the result in `next`).
  bool advance_bytes(const NodeSet& state, std::string_view bytes, NodeSet& next);

  const TokenVocabulary& vocabulary() const { return *vocab_; }
  size_t cached_positions() const { return by_position_.size(); }
  size_t cached_states() const { return by_state_.size(); }

 private:
  struct PositionMask {
    std::vector<uint32_t> accepted;  // bitmask over token ids
    std::vector<int> uncertain;      // ids to check against the full stack
  };
  const PositionMask& frame_mask(uint32_t node);
  PositionMask walk_vocabulary(uint32_t frame);
  // Frames of a stack that the per-position cache looks at: one would make every token longer
  // than a JSON string character "uncertain" (its frame is one character); a few reach the
  // string's closing quote, so only tokens that run past it need the full stack.
  static constexpr int kFrameDepth = 4;
  bool token_fits(uint32_t node, const std::string& bytes);

  StackForest& forest_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  size_t words_;
  std::unordered_map<uint32_t, PositionMask> by_position_;
  // Bounded by bytes (a 151k vocabulary's mask is 19 KB): cleared when full. A decode
  // revisits few states, so a few hundred hold a schema's working set.
  static constexpr size_t kStateCacheBytes = size_t{8} << 20;
  size_t state_capacity_;
  std::map<NodeSet, std::vector<uint32_t>> by_state_;
  NodeSet a_, b_;
};

}  // namespace strata::grammar
