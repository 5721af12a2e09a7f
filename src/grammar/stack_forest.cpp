#include "grammar/stack_forest.h"

#include <algorithm>

namespace strata::grammar {

StackForest::StackForest(const Grammar& grammar) : grammar_(grammar) {
  nodes_.push_back({0, kAccept});     // kAccept marker
  nodes_.push_back({0, kFrameExit});  // kFrameExit marker
  for (uint32_t start : grammar_.rules[0].alternatives) expand(start, kAccept, initial_);
  std::sort(initial_.begin(), initial_.end());
  initial_.erase(std::unique(initial_.begin(), initial_.end()), initial_.end());
}

uint32_t StackForest::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
  auto [it, inserted] = node_ids_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

void StackForest::expand(uint32_t pos, uint32_t parent, NodeSet& out) {
  // Terminates: finish() rejected left recursion, so every cycle consumes a byte.
  while (true) {
    const Element& e = grammar_.elements[pos];
    switch (e.kind) {
      case Element::Kind::Bytes:
        out.push_back(intern(pos, parent));
        return;
      case Element::Kind::End:
        if (parent < kFirstNode) {
          out.push_back(parent);
          return;
        }
        pos = nodes_[parent].pos;
        parent = nodes_[parent].parent;
        continue;
      case Element::Kind::Ref: {
        // A reference in tail position returns straight to our parent: right recursion
        // (x* as r ::= x r | "") then keeps the stack from growing.
        const uint32_t cont = grammar_.elements[pos + 1].kind == Element::Kind::End
                                  ? parent
                                  : intern(pos + 1, parent);
        const std::vector<uint32_t>& alts = grammar_.rules[e.value].alternatives;
        for (size_t a = 0; a + 1 < alts.size(); ++a) expand(alts[a], cont, out);
        pos = alts.back();
        parent = cont;
        continue;
      }
    }
  }
}

uint32_t StackForest::truncate(uint32_t node, int depth) {
  if (node < kFirstNode) return node;
  const Node n = nodes_[node];
  const uint32_t below = depth <= 1 ? kFrameExit : truncate(n.parent, depth - 1);
  // A stack that ends at the root within `depth` frames is kept whole (kAccept below).
  return intern(n.pos, n.parent == kAccept ? kAccept : below);
}

std::span<const uint32_t> StackForest::advance(uint32_t node, uint8_t byte) {
  if (node < kFirstNode) return {};
  if (advance_memo_.size() <= node) advance_memo_.resize(nodes_.size());
  auto& table = advance_memo_[node];
  if (!table) table = std::make_unique<std::array<uint32_t, 256>>();
  if (const uint32_t entry = (*table)[byte]) {
    const uint32_t* at = advance_pool_.data() + entry - 1;
    return {at + 1, at[0]};
  }
  scratch_.clear();
  const Node n = nodes_[node];
  if (grammar_.bytes_of(n.pos).test(byte)) {
    expand(n.pos + 1, n.parent, scratch_);
    std::sort(scratch_.begin(), scratch_.end());
    scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  }
  const auto offset = static_cast<uint32_t>(advance_pool_.size());
  advance_pool_.push_back(static_cast<uint32_t>(scratch_.size()));
  advance_pool_.insert(advance_pool_.end(), scratch_.begin(), scratch_.end());
  // expand() may have interned nodes: the table vector may have grown, so index afresh.
  (*advance_memo_[node])[byte] = offset + 1;
  return {advance_pool_.data() + offset + 1, scratch_.size()};
}

void StackForest::advance_set(const NodeSet& from, uint8_t byte, NodeSet& to) {
  to.clear();
  for (uint32_t node : from) {
    std::span<const uint32_t> next = advance(node, byte);
    to.insert(to.end(), next.begin(), next.end());
  }
  if (from.size() > 1) {
    std::sort(to.begin(), to.end());
    to.erase(std::unique(to.begin(), to.end()), to.end());
  }
}

}  // namespace strata::grammar
