#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/regex.h"

namespace strata::tok {

namespace {

using nlohmann::json;
using Spans = std::vector<std::pair<size_t, size_t>>;

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const std::string& name) {
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  fail(
      "tokenizer.json pre_tokenizer Split: unknown behavior '{}' (expected Removed, Isolated, "
      "MergedWithPrevious, MergedWithNext or Contiguous)",
      name);
}

// Splits text on a regex the way Hugging Face's NormalizedString::split does: the matches
// and the gaps between them cover the text, then `behavior` decides what becomes a piece.
class RegexSplit : public PreTokenizeStep {
 public:
  RegexSplit(const std::string& pattern, Behavior behavior, bool invert, const std::string& what)
      : regex_(pattern, what), behavior_(behavior), invert_(invert) {}

  void split(Pieces& pieces) const override {
    std::vector<std::string_view> out;
    out.reserve(pieces.views.size() * 2);
    thread_local Spans matches;
    thread_local std::vector<std::pair<std::pair<size_t, size_t>, bool>> parts;
    for (std::string_view piece : pieces.views) {
      regex_.find_all(piece, matches);
      parts.clear();
      size_t last = 0;
      for (auto [b, e] : matches) {
        if (b > last) parts.push_back({{last, b}, invert_});
        parts.push_back({{b, e}, !invert_});
        last = e;
      }
      if (last < piece.size()) parts.push_back({{last, piece.size()}, invert_});
      for (auto [b, e] : apply_behavior(parts))
        if (e > b) out.push_back(piece.substr(b, e - b));
    }
    pieces.views = std::move(out);
  }

 private:
  Spans apply_behavior(const std::vector<std::pair<std::pair<size_t, size_t>, bool>>& parts) const {
    Spans out;
    bool previous_match = false;
    switch (behavior_) {
      case Behavior::Isolated:
        for (const auto& [span, m] : parts) out.push_back(span);
        break;
      case Behavior::Removed:
        for (const auto& [span, m] : parts)
          if (!m) out.push_back(span);
        break;
      case Behavior::MergedWithPrevious:
        for (const auto& [span, m] : parts) {
          if (m && !previous_match && !out.empty())
            out.back().second = span.second;
          else
            out.push_back(span);
          previous_match = m;
        }
        break;
      case Behavior::MergedWithNext:
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
          if (it->second && !previous_match && !out.empty())
            out.back().first = it->first.first;
          else
            out.push_back(it->first);
          previous_match = it->second;
        }
        std::reverse(out.begin(), out.end());
        break;
      case Behavior::Contiguous:
        for (size_t i = 0; i < parts.size(); ++i) {
          if (i > 0 && parts[i].second == previous_match)
            out.back().second = parts[i].first.second;
          else
            out.push_back(parts[i].first);
          previous_match = parts[i].second;
        }
        break;
    }
    return out;
  }

  Regex regex_;
  Behavior behavior_;
  bool invert_;
};

// The GPT-2 split that ByteLevel applies when use_regex is set.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class PrefixSpace : public PreTokenizeStep {
 public:
  void split(Pieces& pieces) const override {
    for (std::string_view& p : pieces.views) {
      if (!p.empty() && p[0] == ' ') continue;
      pieces.storage.push_back(" " + std::string(p));
      p = pieces.storage.back();
    }
  }
};

}  // namespace

PreTokenizer::PreTokenizer(const json& spec) {
  if (!spec.is_null()) add(spec, true);
}
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;

void PreTokenizer::add(const json& spec, bool last) {
  const std::string type = spec.value("type", "");
  const std::string what = "tokenizer.json pre_tokenizer " + type;
  if (byte_level_)
    fail("{}: a pre-tokenizer after ByteLevel is not supported (ByteLevel must come last)", what);
  if (type == "Sequence") {
    const json& list = spec.at("pretokenizers");
    for (size_t i = 0; i < list.size(); ++i) add(list[i], last && i + 1 == list.size());
  } else if (type == "Split") {
    const json& pattern = spec.at("pattern");
    std::string regex;
    if (pattern.contains("Regex"))
      regex = pattern["Regex"].get<std::string>();
    else if (pattern.contains("String"))
      regex = Regex::escape(pattern["String"].get<std::string>());
    else
      fail("{}: pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}", what);
    steps_.push_back(
        std::make_unique<RegexSplit>(regex, parse_behavior(spec.value("behavior", "Isolated")),
                                     spec.value("invert", false), what));
  } else if (type == "Digits") {
    const char* pattern = spec.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+";
    steps_.push_back(std::make_unique<RegexSplit>(pattern, Behavior::Isolated, false, what));
  } else if (type == "ByteLevel") {
    if (!last)
      fail("{}: a pre-tokenizer after ByteLevel is not supported (ByteLevel must come last)", what);
    if (spec.value("add_prefix_space", false)) steps_.push_back(std::make_unique<PrefixSpace>());
    if (spec.value("use_regex", true))
      steps_.push_back(std::make_unique<RegexSplit>(kGpt2Pattern, Behavior::Isolated, false, what));
    byte_level_ = true;
  } else {
    fail("{} is not supported (strata supports Split, Digits, ByteLevel and Sequence)",
         type.empty() ? "tokenizer.json pre_tokenizer without a type" : what);
  }
}

void PreTokenizer::pre_tokenize(std::string_view text, Pieces& out) const {
  out.views.clear();
  out.storage.clear();
  if (text.empty()) return;
  out.views.push_back(text);
  for (const auto& step : steps_) step->split(out);
}

}  // namespace strata::tok
