#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <queue>

#include "core/error.h"
#include "tokenizer/token_id.h"
#include "tokenizer/unicode.h"

namespace strata::tok {

using nlohmann::json;

namespace {

std::pair<std::string, std::string> parse_merge(const json& entry, size_t index) {
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string())
    return {entry[0].get<std::string>(), entry[1].get<std::string>()};
  if (entry.is_string()) {
    const std::string s = entry.get<std::string>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
      return {s.substr(0, space), s.substr(space + 1)};
  }
  fail("tokenizer.json model.merges[{}] is {}; expected \"left right\" or [\"left\", \"right\"]",
       index, entry.dump());
}

}  // namespace

BpeModel::BpeModel(const json& spec, bool byte_level) : byte_level_(byte_level) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (spec.contains(key) && spec[key].is_string() && !spec[key].get<std::string>().empty())
      fail("tokenizer.json model.{} = '{}' is not supported by strata's BPE", key,
           spec[key].get<std::string>());
  }
  if (spec.contains("dropout") && spec["dropout"].is_number() && spec["dropout"].get<double>() > 0)
    fail(
        "tokenizer.json model.dropout > 0 (BPE dropout) is not supported: it makes encoding "
        "random");
  byte_fallback_ = spec.value("byte_fallback", false);
  fuse_unk_ = spec.value("fuse_unk", false);
  ignore_merges_ = spec.value("ignore_merges", false);

  const json& vocab = spec.at("vocab");
  if (!vocab.is_object()) fail("tokenizer.json model.vocab must be an object of token -> id");
  int max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const std::optional<int> id = token_id(it.value());
    if (!id)
      fail("tokenizer.json model.vocab['{}'] is {}; a token id must be an integer in 0..{}",
           it.key(), it.value().dump(), kMaxTokenId);
    max_id = std::max(max_id, *id);
  }
  id_to_token_.resize(max_id + 1);
  has_id_.assign(max_id + 1, false);
  std::string raw;
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int id = *token_id(it.value());  // checked above
    id_to_token_[id] = it.key();
    has_id_[id] = true;
    spelled_.emplace(it.key(), id);
    // A byte-level token outside GPT-2's alphabet can never be produced from bytes; it stays
    // decodable but is not matchable.
    if (!byte_level_)
      vocab_.emplace(it.key(), id);
    else if (alphabet.to_bytes(it.key(), raw))
      vocab_.emplace(raw, id);
  }

  byte_token_.fill(-1);
  fallback_token_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (auto id = lookup(std::string(1, static_cast<char>(b)))) byte_token_[b] = *id;
    if (auto it = spelled_.find(fmt::format("<0x{:02X}>", b)); it != spelled_.end())
      fallback_token_[b] = it->second;
  }
  if (spec.contains("unk_token") && spec["unk_token"].is_string()) {
    const std::string unk = spec["unk_token"].get<std::string>();
    auto it = spelled_.find(unk);
    if (it == spelled_.end())
      fail("tokenizer.json model.unk_token '{}' is not in the vocabulary", unk);
    unk_id_ = it->second;
  }

  const json& merges = spec.at("merges");
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = parse_merge(merges[rank], rank);
    const auto l = spelled_.find(left), r = spelled_.find(right), m = spelled_.find(left + right);
    if (l == spelled_.end() || r == spelled_.end() || m == spelled_.end())
      fail("tokenizer.json model.merges[{}] ('{}' '{}') uses a token missing from the vocabulary",
           rank, left, right);
    merges_.emplace(pair_key(l->second, r->second), Merge{static_cast<int>(rank), m->second});
  }
}

std::optional<int> BpeModel::lookup(std::string_view key) const {
  auto it = vocab_.find(key);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int id) const {
  if (id < 0 || id >= static_cast<int>(id_to_token_.size()) || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

std::optional<int> BpeModel::token_to_id(const std::string& token) const {
  auto it = spelled_.find(token);
  if (it == spelled_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::initial_symbols(std::string_view piece, std::vector<int>& symbols) const {
  bool last_was_unk = false;
  auto push_unk = [&](std::string_view what) {
    if (unk_id_ < 0)
      throw RequestError(
          fmt::format("the tokenizer cannot encode '{}': it is not in the vocabulary and the "
                      "model has neither byte fallback nor an unknown token",
                      what));
    if (!(fuse_unk_ && last_was_unk)) symbols.push_back(unk_id_);
    last_was_unk = true;
  };
  if (byte_level_) {
    for (unsigned char b : piece) {
      if (byte_token_[b] >= 0) {
        symbols.push_back(byte_token_[b]);
        last_was_unk = false;
      } else {
        push_unk(fmt::format("byte 0x{:02X}", b));
      }
    }
    return;
  }
  for (size_t pos = 0; pos < piece.size();) {
    const int len = std::min<int>(utf8_sequence_length(static_cast<unsigned char>(piece[pos])),
                                  static_cast<int>(piece.size() - pos));
    const std::string_view ch = piece.substr(pos, len);
    pos += len;
    if (auto id = lookup(ch)) {
      symbols.push_back(*id);
      last_was_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : ch) all = all && fallback_token_[b] >= 0;
      if (all) {
        for (unsigned char b : ch) symbols.push_back(fallback_token_[b]);
        last_was_unk = false;
        continue;
      }
    }
    push_unk(ch);
  }
}

// Applies merges lowest rank first, leftmost among equal ranks, like Hugging Face's
// Word::merge_all: a heap of candidate pairs over a linked list of symbols, O(n log n).
void BpeModel::merge_symbols(std::vector<int>& symbols) const {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return;
  struct Node {
    int id, prev, next;
    bool alive;
  };
  std::vector<Node> nodes(n);
  for (int i = 0; i < n; ++i) nodes[i] = {symbols[i], i - 1, i + 1 < n ? i + 1 : -1, true};
  struct Candidate {
    int rank, pos, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto consider = [&](int pos) {
    const int next = nodes[pos].next;
    if (next < 0) return;
    auto it = merges_.find(pair_key(nodes[pos].id, nodes[next].id));
    if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.merged});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Node& left = nodes[top.pos];
    if (!left.alive || left.next < 0) continue;
    // Stale if either side changed since the candidate was queued.
    auto it = merges_.find(pair_key(left.id, nodes[left.next].id));
    if (it == merges_.end() || it->second.rank != top.rank || it->second.merged != top.merged)
      continue;
    Node& right = nodes[left.next];
    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) nodes[right.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  symbols.clear();
  for (int i = 0; i >= 0; i = nodes[i].next) symbols.push_back(nodes[i].id);
}

void BpeModel::encode(std::string_view piece, std::vector<int>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (auto id = lookup(piece)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = piece.size() <= kMaxCachedPiece;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int> symbols;
  symbols.reserve(piece.size());
  initial_symbols(piece, symbols);
  merge_symbols(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::string(piece), std::move(symbols));
  }
}

}  // namespace strata::tok
