#include "tokenizer/added_vocabulary.h"

#if STRATA_HAVE_UTF8PROC
#include <utf8proc.h>
#endif

#include "core/error.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/token_id.h"
#include "tokenizer/unicode.h"

namespace strata::tok {

using nlohmann::json;

void AddedVocabulary::Trie::insert(std::string_view key, int token) {
  int node = 0;
  for (unsigned char c : key) {
    int next = -1;
    for (auto [ch, child] : nodes[node].children)
      if (ch == c) next = child;
    if (next < 0) {
      next = static_cast<int>(nodes.size());
      nodes[node].children.emplace_back(c, next);
      nodes.emplace_back();
    }
    node = next;
  }
  // Duplicate contents: the first one listed wins.
  if (nodes[node].token < 0) nodes[node].token = token;
  first_byte[static_cast<unsigned char>(key[0])] = true;
}

int AddedVocabulary::Trie::longest_match(std::string_view text, size_t pos, size_t& length) const {
  int node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    int next = -1;
    for (auto [ch, child] : nodes[node].children)
      if (ch == static_cast<unsigned char>(text[i])) next = child;
    if (next < 0) break;
    node = next;
    if (nodes[node].token >= 0) {
      best = nodes[node].token;
      length = i + 1 - pos;
    }
  }
  return best;
}

AddedVocabulary::AddedVocabulary(const json& added_tokens, const Normalizer* normalizer) {
  if (added_tokens.is_null()) return;
  for (const json& t : added_tokens) {
    AddedToken token;
    const std::optional<int> id = token_id(t.at("id"));
    if (!id)
      fail("tokenizer.json added_tokens entry {} has id {}; a token id must be an integer in 0..{}",
           t.value("content", json("?")).dump(), t.at("id").dump(), kMaxTokenId);
    token.id = *id;
    token.content = t.at("content").get<std::string>();
    token.special = t.value("special", false);
    token.lstrip = t.value("lstrip", false);
    token.rstrip = t.value("rstrip", false);
    token.normalized = t.value("normalized", !token.special);
    token.single_word = t.value("single_word", false);
    if (token.content.empty())
      fail("tokenizer.json added_tokens: token {} has empty content", token.id);
    std::string key = token.content;
    if (token.normalized && normalizer) normalizer->normalize(key);
    const int index = static_cast<int>(tokens_.size());
    by_id_[token.id] = tokens_.size();
    if (!key.empty()) (token.normalized ? normalized_ : raw_).insert(key, index);
    tokens_.push_back(std::move(token));
    match_keys_.push_back(std::move(key));
  }
}

const AddedToken* AddedVocabulary::find(int id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

namespace {

// Word characters for single_word, as Rust's char::is_alphanumeric plus '_'.
bool is_word_char(char32_t cp) {
  if (cp == '_') return true;
#if !STRATA_HAVE_UTF8PROC
  // Without Unicode tables: ASCII letters and digits, and every non-ASCII character.
  return cp >= 0x80 || std::isalnum(static_cast<int>(cp));
#else
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
#endif
}

// Start of the character that ends at `end` (> 0).
size_t char_start_before(std::string_view text, size_t end) {
  size_t p = end - 1;
  while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
  return p;
}

char32_t last_char(std::string_view text, size_t end) {
  int len;
  return utf8_decode(text, char_start_before(text, end), len);
}

}  // namespace

void AddedVocabulary::split(std::string_view text, bool normalized,
                            std::vector<Segment>& out) const {
  const Trie& trie = normalized ? normalized_ : raw_;
  size_t last_stop = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t length = 0;
    const int index = trie.longest_match(text, pos, length);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t start = pos, stop = pos + length;
    pos = stop;
    if (token.single_word) {
      int len;
      const bool word_before = start > 0 && is_word_char(last_char(text, start));
      const bool word_after = stop < text.size() && is_word_char(utf8_decode(text, stop, len));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      // Whitespace just before the token belongs to it, unless an earlier match took it.
      size_t s = start;
      while (s > last_stop && is_unicode_whitespace(last_char(text, s)))
        s = char_start_before(text, s);
      start = s;
    }
    if (token.rstrip) {
      int len;
      while (stop < text.size() && is_unicode_whitespace(utf8_decode(text, stop, len))) stop += len;
      pos = stop;
    }
    if (start > last_stop) out.push_back({-1, last_stop, start});
    out.push_back({token.id, start, stop});
    last_stop = stop;
  }
  if (last_stop < text.size()) out.push_back({-1, last_stop, text.size()});
}

}  // namespace strata::tok
