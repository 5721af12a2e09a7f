#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_id.h"
#include "tokenizer/unicode.h"

namespace strata::tok {

using nlohmann::json;

namespace {

// A special token's id in the post-processor, checked (tokenizer/token_id.h).
int checked_id(const json& v, const std::string& source, const std::string& name) {
  const std::optional<int> id = token_id(v);
  if (!id)
    fail("{}: post_processor special token '{}' has id {}; a token id must be an integer in 0..{}",
         source, name, v.dump(), kMaxTokenId);
  return *id;
}

// Reads the post-processor into the ids it puts around a single sequence. TemplateProcessing
// names its special tokens; Bert/Roberta give [token, id] pairs; ByteLevel only trims offsets.
void read_post_processor(const json& spec, std::vector<int>& prefix, std::vector<int>& suffix,
                         const std::string& source) {
  if (spec.is_null()) return;
  const std::string type = spec.value("type", "");
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const json& p : spec.at("processors")) read_post_processor(p, prefix, suffix, source);
    return;
  }
  if (type == "TemplateProcessing") {
    bool seen_sequence = false;
    for (const json& piece : spec.at("single")) {
      if (piece.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      if (!piece.contains("SpecialToken"))
        fail("{}: post_processor TemplateProcessing piece {} is neither Sequence nor SpecialToken",
             source, piece.dump());
      const std::string name = piece["SpecialToken"].at("id").get<std::string>();
      const json& specials = spec.at("special_tokens");
      if (!specials.contains(name))
        fail(
            "{}: post_processor TemplateProcessing uses special token '{}' missing from its "
            "special_tokens",
            source, name);
      for (const json& id : specials[name].at("ids"))
        (seen_sequence ? suffix : prefix).push_back(checked_id(id, source, name));
    }
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    prefix.push_back(checked_id(spec.at("cls").at(1), source, "cls"));
    suffix.push_back(checked_id(spec.at("sep").at(1), source, "sep"));
    return;
  }
  fail(
      "{}: post_processor {} is not supported (strata supports TemplateProcessing, ByteLevel, "
      "BertProcessing, RobertaProcessing, Sequence)",
      source, type.empty() ? "without a type" : type);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::string file = path;
  if (fs::is_directory(path)) file = (fs::path(path) / "tokenizer.json").string();
  if (!fs::exists(file))
    fail(
        "no tokenizer at {}: expected tokenizer.json (the Hugging Face fast-tokenizer file; "
        "convert a slow tokenizer with transformers' save_pretrained)",
        file);
  json spec;
  try {
    spec = json::parse(read_file(file));
  } catch (const json::exception& e) {
    fail("{} is not valid JSON: {}", file, e.what());
  }
  return Tokenizer(spec, file);
}

Tokenizer::Tokenizer(const json& spec, const std::string& source) {
  try {
    const json& model = spec.at("model");
    const std::string type = model.value("type", "BPE");
    if (type != "BPE")
      fail(
          "tokenizer model type {} is not supported (strata supports BPE, including "
          "SentencePiece-style "
          "BPE with byte fallback)",
          type);
    normalizer_ = make_normalizer(spec.value("normalizer", json()));
    pre_tokenizer_ = std::make_unique<PreTokenizer>(spec.value("pre_tokenizer", json()));
    model_ = std::make_unique<BpeModel>(model, pre_tokenizer_->byte_level());
    added_ =
        std::make_unique<AddedVocabulary>(spec.value("added_tokens", json()), normalizer_.get());
    decoder_ = make_decoder(spec.value("decoder", json()));
    read_post_processor(spec.value("post_processor", json()), prefix_ids_, suffix_ids_, source);
  } catch (const json::exception& e) {
    fail("{}: malformed tokenizer.json: {}", source, e.what());
  } catch (const Error& e) {
    if (std::string_view(e.what()).find(source) != std::string_view::npos) throw;
    fail("{}: {}", source, e.what());
  }
  vocab_size_ = model_->vocab_size();
  for (const AddedToken& t : added_->tokens()) vocab_size_ = std::max(vocab_size_, t.id + 1);
  for (int id : prefix_ids_)
    if (id < 0 || id >= vocab_size_)
      fail("{}: post_processor adds id {} outside the vocabulary", source, id);
  for (int id : suffix_ids_)
    if (id < 0 || id >= vocab_size_)
      fail("{}: post_processor adds id {} outside the vocabulary", source, id);
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void Tokenizer::encode_segment(std::string_view text, std::vector<int>& out) const {
  if (text.empty()) return;
  std::string normalized;
  if (normalizer_) {
    normalized.assign(text);
    normalizer_->normalize(normalized);
    text = normalized;
  }
  std::vector<Segment> segments;
  added_->split(text, /*normalized=*/true, segments);
  Pieces pieces;
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    pre_tokenizer_->pre_tokenize(text.substr(s.begin, s.end - s.begin), pieces);
    for (std::string_view piece : pieces.views) model_->encode(piece, out);
  }
}

std::vector<int> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const size_t bad = utf8_first_invalid(text); bad != std::string_view::npos)
    throw RequestError(
        fmt::format("text to encode is not valid UTF-8 (byte 0x{:02X} at offset {}); "
                    "send UTF-8 text",
                    static_cast<unsigned char>(text[bad]), bad));
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> segments;
  added_->split(text, /*normalized=*/false, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0)
      ids.push_back(s.id);
    else
      encode_segment(text.substr(s.begin, s.end - s.begin), ids);
  }
  if (add_special_tokens) add_special(ids);
  return ids;
}

void Tokenizer::add_special(std::vector<int>& ids) const {
  if (prefix_ids_.empty() && suffix_ids_.empty()) return;
  ids.insert(ids.begin(), prefix_ids_.begin(), prefix_ids_.end());
  ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
}

std::string Tokenizer::decode(std::span<const int> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int id : ids) {
    if (const AddedToken* added = added_->find(id)) {
      if (!(skip_special_tokens && added->special)) tokens.push_back(added->content);
      continue;
    }
    const std::string* token = model_->id_to_token(id);
    if (!token)
      throw RequestError(fmt::format("token id {} is not in the tokenizer's vocabulary (size {})",
                                     id, vocab_size_));
    tokens.push_back(*token);
  }
  return run_decoder(decoder_.get(), std::move(tokens));
}

std::optional<int> Tokenizer::token_to_id(const std::string& token) const {
  for (const AddedToken& t : added_->tokens())
    if (t.content == token) return t.id;
  return model_->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int id) const {
  if (const AddedToken* added = added_->find(id)) return added->content;
  if (const std::string* token = model_->id_to_token(id)) return *token;
  return std::nullopt;
}

bool Tokenizer::is_special(int id) const {
  const AddedToken* added = added_->find(id);
  return added && added->special;
}

bool Tokenizer::is_byte_fallback(int id) const {
  if (!model_->byte_fallback() || added_->find(id)) return false;
  const std::string* token = model_->id_to_token(id);
  return token && token->size() == 6 && token->compare(0, 3, "<0x") == 0 && token->back() == '>';
}

}  // namespace strata::tok
