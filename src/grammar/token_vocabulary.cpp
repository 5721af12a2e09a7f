#include "grammar/token_vocabulary.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace strata::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::optional<std::string>> bytes) {
  bytes_.resize(bytes.size());
  usable_.resize(bytes.size(), false);
  for (size_t id = 0; id < bytes.size(); ++id) {
    if (!bytes[id] || bytes[id]->empty()) continue;
    bytes_[id] = std::move(*bytes[id]);
    usable_[id] = true;
    sorted_.push_back(static_cast<int>(id));
    max_length_ = std::max(max_length_, bytes_[id].size());
  }
  // std::string orders by unsigned bytes (char_traits<char>::compare), as a trie would.
  std::sort(sorted_.begin(), sorted_.end(), [&](int a, int b) { return bytes_[a] < bytes_[b]; });
  lcp_.resize(sorted_.size(), 0);
  for (size_t k = 1; k < sorted_.size(); ++k) {
    const std::string& a = bytes_[sorted_[k - 1]];
    const std::string& b = bytes_[sorted_[k]];
    uint32_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    lcp_[k] = n;
  }
  end_offset_.resize(sorted_.size() + 1);
  uint32_t total = 0;
  for (size_t k = 0; k < sorted_.size(); ++k) {
    end_offset_[k] = total;
    total += static_cast<uint32_t>(bytes_[sorted_[k]].size());
    sorted_bytes_ += bytes_[sorted_[k]];
  }
  end_offset_[sorted_.size()] = total;
  subtree_end_.resize(total);
  // Backwards: a neighbour sharing the first d + 1 bytes ends the same subtree.
  for (size_t k = sorted_.size(); k-- > 0;) {
    const size_t len = bytes_[sorted_[k]].size();
    for (size_t d = 0; d < len; ++d) {
      const bool shared = k + 1 < sorted_.size() && lcp_[k + 1] >= d + 1;
      subtree_end_[end_offset_[k] + d] =
          shared ? subtree_end_[end_offset_[k + 1] + d] : static_cast<uint32_t>(k + 1);
    }
  }
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(
    const tok::Tokenizer& tokenizer) {
  const int n = tokenizer.vocab_size();
  std::vector<std::optional<std::string>> spelled(n);
  std::vector<bool> added(n, false);
  for (const tok::AddedToken& t : tokenizer.added_tokens()) {
    if (t.id < 0 || t.id >= n) continue;
    added[t.id] = true;
    if (!t.special) spelled[t.id] = t.content;
  }
  // Byte-level when every model token is spelled in GPT-2's byte alphabet.
  const tok::ByteLevelAlphabet& alphabet = tok::ByteLevelAlphabet::get();
  bool byte_level = true;
  std::vector<std::optional<std::string>> raw(n);
  for (int id = 0; id < n; ++id) {
    if (added[id]) continue;
    std::optional<std::string> token = tokenizer.id_to_token(id);
    if (!token) continue;
    std::string out;
    if (byte_level && alphabet.to_bytes(*token, out)) {
      raw[id] = std::move(out);
    } else {
      byte_level = false;
    }
  }
  for (int id = 0; id < n; ++id) {
    if (added[id]) continue;
    std::optional<std::string> token = tokenizer.id_to_token(id);
    if (!token) continue;
    if (byte_level) {
      spelled[id] = raw[id];
    } else if (tokenizer.is_byte_fallback(id)) {
      spelled[id] = std::string(1, static_cast<char>(std::stoi(token->substr(3, 2), nullptr, 16)));
    } else {
      std::string text;  // SentencePiece: U+2581 stands for a space
      for (size_t i = 0; i < token->size(); ++i) {
        if (token->compare(i, 3, "\xE2\x96\x81") == 0) {
          text += ' ';
          i += 2;
        } else {
          text += (*token)[i];
        }
      }
      spelled[id] = std::move(text);
    }
  }
  return std::make_shared<const TokenVocabulary>(std::move(spelled));
}

}  // namespace strata::grammar
