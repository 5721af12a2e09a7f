#pragma once
// The pushdown automaton of a Grammar, with every stack interned as a node of a shared tree
// (a node is the position to match next plus its parent, the position to return to). A match
// state is then a small sorted set of node ids, and "advance this stack by one byte" is a pure
// function of (node, byte), memoized: after a short warm-up the automaton runs as lookups.
//
// Node ids below kFirstNode are markers: kAccept (the stack emptied, the root rule matched in
// full) and kFrameExit (used by the token-mask analysis: a stack rooted in a local frame ran
// past that frame's end, so what follows depends on the context below).
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace strata::grammar {

using NodeSet = std::vector<uint32_t>;  // sorted, unique

class StackForest {
 public:
  static constexpr uint32_t kAccept = 0;
  static constexpr uint32_t kFrameExit = 1;
  static constexpr uint32_t kFirstNode = 2;

  explicit StackForest(const Grammar& grammar);

  const Grammar& grammar() const { return grammar_; }
  // The state before any byte: the root rule's alternatives, expanded.
  const NodeSet& initial() const { return initial_; }
  // The top `depth` frames of `node`'s stack, with kFrameExit below them (the mask analysis'
  // start: what a token does within these frames does not depend on the rest).
  uint32_t truncate(uint32_t node, int depth);
  uint32_t position(uint32_t node) const { return nodes_[node].pos; }

  // The nodes reached from `node` by consuming `byte` (empty: the byte is not allowed).
  std::span<const uint32_t> advance(uint32_t node, uint8_t byte);
  // Advances every node of `from` by `byte` into `to` (cleared first).
  void advance_set(const NodeSet& from, uint8_t byte, NodeSet& to);
  size_t node_count() const { return nodes_.size(); }

 private:
  struct Node {
    uint32_t pos;     // element to match next (a Bytes element once expanded)
    uint32_t parent;  // continuation node, or kAccept / kFrameExit at the bottom
  };
  uint32_t intern(uint32_t pos, uint32_t parent);
  // Expands (pos, parent) until every stack has a byte set on top; appends to `out`.
  void expand(uint32_t pos, uint32_t parent, NodeSet& out);

  const Grammar& grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  // advance memo, a table per node (allocated when the node is first advanced: the mask walks
  // advance the same few nodes hundreds of thousands of times, so a lookup must be an index):
  // entry = 1 + offset into advance_pool_, which holds the count and then the nodes; 0 = not
  // yet computed.
  std::vector<std::unique_ptr<std::array<uint32_t, 256>>> advance_memo_;
  std::vector<uint32_t> advance_pool_;
  NodeSet initial_;
  NodeSet scratch_;
};

}  // namespace strata::grammar
