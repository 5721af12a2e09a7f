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

NodeSet StackForest::local_frame(uint32_t pos) {
  NodeSet out;
  expand(pos, kFrameExit, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::span<const uint32_t> StackForest::advance(uint32_t node, uint8_t byte) {
  if (node < kFirstNode) return {};
  const uint64_t key = (static_cast<uint64_t>(node) << 8) | byte;
  if (auto it = advance_memo_.find(key); it != advance_memo_.end())
    return {advance_pool_.data() + it->second.first, it->second.second};
  scratch_.clear();
  const Node n = nodes_[node];
  if (grammar_.bytes_of(n.pos).test(byte)) {
    expand(n.pos + 1, n.parent, scratch_);
    std::sort(scratch_.begin(), scratch_.end());
    scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  }
  const auto offset = static_cast<uint32_t>(advance_pool_.size());
  advance_pool_.insert(advance_pool_.end(), scratch_.begin(), scratch_.end());
  advance_memo_.emplace(key, std::make_pair(offset, static_cast<uint32_t>(scratch_.size())));
  return {advance_pool_.data() + offset, scratch_.size()};
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
