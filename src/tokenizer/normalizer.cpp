#include "tokenizer/normalizer.h"

#if STRATA_HAVE_UTF8PROC
#include <utf8proc.h>
#endif

#include <vector>

#include "core/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace strata::tok {

namespace {

using nlohmann::json;

#if STRATA_HAVE_UTF8PROC
constexpr int kCompose = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
constexpr int kDecompose = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
constexpr int kCompat = UTF8PROC_COMPAT;
#else
constexpr int kCompose = 0, kDecompose = 0, kCompat = 0;  // unused: these forms refuse to load
#endif

class UnicodeNormalizer : public Normalizer {
 public:
  UnicodeNormalizer(std::string name, int options) : name_(std::move(name)), options_(options) {}
  // ASCII never changes under any normalization form and never composes with what follows
  // it, so only runs of non-ASCII characters (with the one ASCII character before each, which
  // a combining mark may attach to) go through utf8proc.
  void normalize(std::string& text) const override {
    const auto ascii = [&](size_t i) { return static_cast<unsigned char>(text[i]) < 0x80; };
    size_t first = 0;
    while (first < text.size() && ascii(first)) ++first;
    if (first == text.size()) return;
    std::string out;
    out.reserve(text.size() + 16);
    size_t done = 0;
    for (size_t i = first; i < text.size();) {
      const size_t start = i > done ? i - 1 : i;  // the ASCII character before the run
      size_t end = i;
      while (end < text.size() && !ascii(end)) ++end;
      out.append(text, done, start - done);
      out += normalize_run(std::string_view(text).substr(start, end - start));
      done = end;
      i = end;
      while (i < text.size() && ascii(i)) ++i;
    }
    out.append(text, done, std::string::npos);
    text = std::move(out);
  }

 private:
  std::string normalize_run(std::string_view run) const {
#if STRATA_HAVE_UTF8PROC
    utf8proc_uint8_t* result = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                static_cast<utf8proc_ssize_t>(run.size()), &result,
                                static_cast<utf8proc_option_t>(options_));
    if (n < 0) fail("{} normalization failed: {}", name_, utf8proc_errmsg(n));
    std::string out(reinterpret_cast<char*>(result), static_cast<size_t>(n));
    std::free(result);
    return out;
#else
    fail("{} normalization of '{}' needs libutf8proc", name_, run);
#endif
  }

  std::string name_;
  int options_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      int len;
      const char32_t cp = utf8_decode(text, pos, len);
      pos += len;
#if STRATA_HAVE_UTF8PROC
      utf8_append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
#else
      utf8_append(out, cp < 0x80 ? static_cast<char32_t>(std::tolower(static_cast<int>(cp))) : cp);
#endif
    }
    text = std::move(out);
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    int len;
    while (left_ && begin < end && is_unicode_whitespace(utf8_decode(text, begin, len)))
      begin += len;
    while (right_ && end > begin) {
      size_t p = end - 1;
      while (p > begin && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
      if (!is_unicode_whitespace(utf8_decode(text, p, len))) break;
      end = p;
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Hugging Face prepends only to non-empty strings.
class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Replace : public Normalizer {
 public:
  Replace(const json& pattern, std::string content, const std::string& what)
      : content_(std::move(content)) {
    if (pattern.contains("String")) {
      literal_ = pattern["String"].get<std::string>();
      if (literal_.empty()) fail("{}: Replace with an empty String pattern", what);
    } else if (pattern.contains("Regex")) {
      regex_ = std::make_unique<Regex>(pattern["Regex"].get<std::string>(), what);
    } else {
      fail("{}: Replace pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}", what);
    }
  }
  void normalize(std::string& text) const override {
    std::vector<std::pair<size_t, size_t>> spans;
    if (regex_) {
      regex_->find_all(text, spans);
    } else {
      for (size_t p = text.find(literal_); p != std::string::npos;
           p = text.find(literal_, p + literal_.size()))
        spans.emplace_back(p, p + literal_.size());
    }
    if (spans.empty()) return;
    std::string out;
    size_t last = 0;
    for (auto [b, e] : spans) {
      out.append(text, last, b - last);
      out += content_;
      last = e;
    }
    out.append(text, last, std::string::npos);
    text = std::move(out);
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec.value("type", "");
  const std::string what = "tokenizer.json normalizer " + type;
#if !STRATA_HAVE_UTF8PROC
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD" || type == "Lowercase")
    fail(
        "{} needs Unicode tables from libutf8proc, which this strata was built without; install "
        "libutf8proc-dev and re-run cmake",
        what);
#endif
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(type, kCompose);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(type, kDecompose);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(type, kCompose | kCompat);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(type, kDecompose | kCompat);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip")
    return std::make_unique<Strip>(spec.value("strip_left", true), spec.value("strip_right", true));
  if (type == "Prepend") return std::make_unique<Prepend>(spec.at("prepend").get<std::string>());
  if (type == "Replace")
    return std::make_unique<Replace>(spec.at("pattern"), spec.at("content").get<std::string>(),
                                     what);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const auto& p : spec.at("normalizers"))
      if (auto n = make_normalizer(p)) parts.push_back(std::move(n));
    if (parts.empty()) return nullptr;
    if (parts.size() == 1) return std::move(parts[0]);
    return std::make_unique<Sequence>(std::move(parts));
  }
  fail(
      "{} is not supported (strata supports NFC, NFD, NFKC, NFKD, Lowercase, Strip, Prepend, "
      "Replace, Sequence)",
      what.empty() ? "normalizer without a type" : what);
}

}  // namespace strata::tok
