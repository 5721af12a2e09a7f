#include "tokenizer/decoder.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace strata::tok {

namespace {

using nlohmann::json;

// Byte-level characters back to bytes; characters outside the alphabet (in added tokens)
// pass through as their UTF-8. The bytes of all tokens are joined, then made text lossily.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
    std::string bytes;
    for (const std::string& t : tokens) {
      for (size_t pos = 0; pos < t.size();) {
        int len;
        const char32_t cp = utf8_decode(t, pos, len);
        if (cp < alphabet.char_to_byte.size() && alphabet.char_to_byte[cp] != 0xFFFF)
          bytes += static_cast<char>(alphabet.char_to_byte[cp]);
        else
          bytes.append(t, pos, len);
        pos += len;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::string out;
      size_t last = 0;
      for (size_t p = t.find(pattern_); p != std::string::npos; p = t.find(pattern_, last)) {
        out.append(t, last, p - last);
        out += content_;
        last = p + pattern_.size();
      }
      out.append(t, last, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string pattern_, content_;
};

// Runs of <0xNN> tokens become the text their bytes spell; a run that is not valid UTF-8
// becomes one U+FFFD per byte token.
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string run;
    int run_tokens = 0;
    auto flush = [&]() {
      if (run_tokens == 0) return;
      if (utf8_first_invalid(run) == std::string::npos) {
        out.push_back(run);
      } else {
        for (int i = 0; i < run_tokens; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_tokens = 0;
    };
    for (std::string& t : tokens) {
      int byte;
      if (parse_byte_token(t, byte)) {
        run += static_cast<char>(byte);
        ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

  static bool parse_byte_token(const std::string& t, int& byte) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return false;
    byte = 0;
    for (int i = 3; i < 5; ++i) {
      const char c = t[i];
      int v;
      if (c >= '0' && c <= '9')
        v = c - '0';
      else if (c >= 'A' && c <= 'F')
        v = c - 'A' + 10;
      else if (c >= 'a' && c <= 'f')
        v = c - 'a' + 10;
      else
        return false;
      byte = byte * 16 + v;
    }
    return true;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, int start, int stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      size_t begin = 0, end = t.size();
      for (int i = 0; i < start_ && t.compare(begin, content_.size(), content_) == 0; ++i)
        begin += content_.size();
      for (int i = 0; i < stop_ && end >= begin + content_.size() &&
                      t.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i)
        end -= content_.size();
      t = t.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  int start_, stop_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec.value("type", "");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(spec.at("content").get<std::string>(),
                                          spec.value("start", 0), spec.value("stop", 0));
  if (type == "Replace") {
    const json& pattern = spec.at("pattern");
    if (!pattern.contains("String"))
      fail("tokenizer.json decoder Replace with a Regex pattern is not supported (only String)");
    return std::make_unique<ReplaceDecoder>(pattern["String"].get<std::string>(),
                                            spec.at("content").get<std::string>());
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const json& p : spec.at("decoders"))
      if (auto d = make_decoder(p)) parts.push_back(std::move(d));
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  fail(
      "tokenizer.json decoder {} is not supported (strata supports ByteLevel, Replace, "
      "ByteFallback, "
      "Fuse, Strip, Sequence)",
      type.empty() ? "without a type" : type);
}

std::string run_decoder(const Decoder* decoder, std::vector<std::string> tokens) {
  std::string out;
  if (!decoder) {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decoder->decode_chain(tokens);
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace strata::tok
