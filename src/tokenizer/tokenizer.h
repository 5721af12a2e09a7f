#pragma once
// A Hugging Face tokenizer loaded from tokenizer.json: normalizer, added tokens,
// pre-tokenizer, BPE model, post-processor and decoder, each checked at load time (an
// unsupported component is an Error naming it).
//
// Encoding follows Hugging Face's order: added tokens that are not `normalized` are cut out
// of the raw text; each remaining segment is normalized, then `normalized` added tokens are
// cut out; each remaining segment is pre-tokenized and the pieces are BPE-encoded; finally,
// with add_special_tokens, the post-processor adds its tokens (e.g. BOS).
//
// Text must be valid UTF-8 (encode throws RequestError naming the first bad byte). Decoding
// never fails on ids in the vocabulary; byte sequences that are not UTF-8 decode to U+FFFD.
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_vocabulary.h"

namespace strata::tok {

class Normalizer;
class PreTokenizer;
class BpeModel;
class Decoder;

class Tokenizer {
 public:
  // `path` is tokenizer.json or a directory holding it.
  static Tokenizer load(const std::string& path);
  // `source` names the origin in error messages.
  Tokenizer(const nlohmann::json& spec, const std::string& source);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  std::vector<int> encode(std::string_view text, bool add_special_tokens = false) const;
  std::string decode(std::span<const int> ids, bool skip_special_tokens = false) const;

  // Token strings as tokenizer.json spells them (byte-level tokens in GPT-2's alphabet).
  std::optional<int> token_to_id(const std::string& token) const;
  std::optional<std::string> id_to_token(int id) const;
  bool is_special(int id) const;
  // A <0xNN> token of a model with byte fallback.
  bool is_byte_fallback(int id) const;
  // One past the largest id of the model or the added tokens.
  int vocab_size() const { return vocab_size_; }
  const std::vector<AddedToken>& added_tokens() const { return added_->tokens(); }

 private:
  void add_special(std::vector<int>& ids) const;
  void encode_segment(std::string_view text, std::vector<int>& out) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<AddedVocabulary> added_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Decoder> decoder_;
  // The post-processor's single-sequence template: ids before and after the text.
  std::vector<int> prefix_ids_, suffix_ids_;
  int vocab_size_ = 0;
};

}  // namespace strata::tok
