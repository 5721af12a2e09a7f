#pragma once
// tokenizer.json "added_tokens": strings matched in the text before the model sees it
// (leftmost, then longest), honouring `lstrip`/`rstrip` (swallow neighbouring whitespace),
// `single_word` (only between non-word characters) and `normalized` (matched in the
// normalized text rather than the raw text). `special` marks tokens that
// skip_special_tokens drops when decoding.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata::tok {

class Normalizer;

struct AddedToken {
  int id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, normalized = false, single_word = false;
};

// A piece of text: either an added token (`id` >= 0) or plain text [begin, end).
struct Segment {
  int id = -1;
  size_t begin = 0, end = 0;
};

class AddedVocabulary {
 public:
  // `normalizer` (may be null) normalizes the content of `normalized` tokens, as HF does.
  AddedVocabulary(const nlohmann::json& added_tokens, const Normalizer* normalizer);

  // Splits `text` on the tokens of one kind (normalized or not); text segments are kept.
  void split(std::string_view text, bool normalized, std::vector<Segment>& out) const;

  const AddedToken* find(int id) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  // A byte trie of one kind of token; node 0 is the root.
  struct Trie {
    struct Node {
      int token = -1;  // index into tokens_ when a token ends here
      std::vector<std::pair<unsigned char, int>> children;
    };
    std::vector<Node> nodes{Node{}};
    bool first_byte[256] = {};
    void insert(std::string_view key, int token);
    // Index of the longest token starting at text[pos] and its length, or -1.
    int longest_match(std::string_view text, size_t pos, size_t& length) const;
  };

  std::vector<AddedToken> tokens_;
  std::vector<std::string> match_keys_;  // content, normalized for `normalized` tokens
  std::unordered_map<int, size_t> by_id_;
  Trie raw_, normalized_;
};

}  // namespace strata::tok
