#include "grammar/token_masker.h"

#include <algorithm>

namespace strata::grammar {

TokenMasker::TokenMasker(StackForest& forest, std::shared_ptr<const TokenVocabulary> vocabulary)
    : forest_(forest),
      vocab_(std::move(vocabulary)),
      words_((vocab_->size() + 31) / 32),
      state_capacity_(std::max<size_t>(16, kStateCacheBytes / (4 * words_ + 1))) {}

TokenMasker::PositionMask TokenMasker::walk_vocabulary(uint32_t frame) {
  PositionMask out;
  out.accepted.assign(words_, 0);
  const std::vector<int>& ids = vocab_->sorted();
  const std::vector<uint32_t>& lcp = vocab_->lcp();
  const size_t max_len = vocab_->max_length();
  // level[d]: the stacks after the first d bytes of the current token; exited[d]: some stack
  // left the frame before byte d with bytes still to come (those need the real context).
  std::vector<NodeSet> level(max_len + 1);
  std::vector<char> exited(max_len + 1, 0);
  level[0] = {frame};
  size_t valid = 0;  // level[0..valid] hold the previous token's prefix
  for (size_t k = 0; k < ids.size();) {
    const std::string_view s = vocab_->sorted_bytes(k);
    size_t d = std::min<size_t>(lcp[k], valid);
    bool dead = false;
    for (; d < s.size(); ++d) {
      const NodeSet& cur = level[d];
      const bool leaves = !cur.empty() && cur.front() == StackForest::kFrameExit;
      exited[d + 1] = exited[d] || leaves;
      forest_.advance_set(cur, static_cast<uint8_t>(s[d]), level[d + 1]);
      if (level[d + 1].empty() && !exited[d + 1]) {
        dead = true;
        break;
      }
    }
    if (dead) {
      // Every token starting with s[0..d] is refused: skip them all.
      valid = d;
      k = vocab_->subtree_end(k, d);
      continue;
    }
    valid = s.size();
    const int id = ids[k];
    if (!level[s.size()].empty())
      out.accepted[id >> 5] |= uint32_t{1} << (id & 31);
    else if (exited[s.size()])
      out.uncertain.push_back(id);
    ++k;
  }
  return out;
}

const TokenMasker::PositionMask& TokenMasker::frame_mask(uint32_t node) {
  const uint32_t frame = forest_.truncate(node, kFrameDepth);
  auto it = by_position_.find(frame);
  if (it == by_position_.end()) it = by_position_.emplace(frame, walk_vocabulary(frame)).first;
  return it->second;
}

bool TokenMasker::token_fits(uint32_t node, const std::string& bytes) {
  a_.assign(1, node);
  for (char c : bytes) {
    forest_.advance_set(a_, static_cast<uint8_t>(c), b_);
    if (b_.empty()) return false;
    std::swap(a_, b_);
  }
  return true;
}

bool TokenMasker::advance_bytes(const NodeSet& state, std::string_view bytes, NodeSet& next) {
  NodeSet cur = state, tmp;
  for (char c : bytes) {
    forest_.advance_set(cur, static_cast<uint8_t>(c), tmp);
    if (tmp.empty()) return false;
    std::swap(cur, tmp);
  }
  next = std::move(cur);
  return true;
}

void TokenMasker::fill_mask(const NodeSet& state, std::span<uint32_t> words) {
  std::fill(words.begin(), words.end(), 0);
  if (auto it = by_state_.find(state); it != by_state_.end()) {
    std::copy(it->second.begin(), it->second.end(), words.begin());
    return;
  }
  std::vector<uint32_t> mask(words_, 0);
  for (uint32_t node : state) {
    if (node < StackForest::kFirstNode) continue;
    const PositionMask& pm = frame_mask(node);
    for (size_t w = 0; w < words_; ++w) mask[w] |= pm.accepted[w];
    for (int id : pm.uncertain) {
      const uint32_t bit = uint32_t{1} << (id & 31);
      if (!(mask[id >> 5] & bit) && token_fits(node, vocab_->bytes(id))) mask[id >> 5] |= bit;
    }
  }
  std::copy(mask.begin(), mask.end(), words.begin());
  if (by_state_.size() >= state_capacity_) by_state_.clear();
  by_state_.emplace(state, std::move(mask));
}

}  // namespace strata::grammar
