#include "tokenizer/unicode.h"

namespace strata::tok {

int utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

char32_t utf8_decode(std::string_view text, size_t pos, int& len) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  len = utf8_sequence_length(b(0));
  if (pos + len > text.size()) len = 1;
  switch (len) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// Length of the valid UTF-8 sequence at bytes[pos] (1..4), or -k where k >= 1 is the length
// of the maximal invalid subpart there (Unicode's "maximal subpart" rule, which Rust follows).
// `truncated` is set when the subpart is a valid but unfinished prefix cut by the end.
int classify(std::string_view s, size_t pos, bool& truncated) {
  truncated = false;
  const auto c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int i = 1; i <= need; ++i) {
    if (pos + i >= s.size()) {
      truncated = true;
      return -i;
    }
    const auto d = static_cast<unsigned char>(s[pos + i]);
    const unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (d < l || d > h) return -i;
  }
  return need + 1;
}

}  // namespace

size_t utf8_first_invalid(std::string_view text) {
  bool truncated;
  for (size_t pos = 0; pos < text.size();) {
    const int n = classify(text, pos, truncated);
    if (n < 0) return pos;
    pos += n;
  }
  return std::string_view::npos;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  bool truncated;
  for (size_t pos = 0; pos < bytes.size();) {
    const int n = classify(bytes, pos, truncated);
    if (n > 0) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      utf8_append(out, kReplacementChar);
      pos += -n;
    }
  }
  return out;
}

size_t utf8_stable_prefix(std::string_view bytes) {
  bool truncated;
  for (size_t pos = 0; pos < bytes.size();) {
    const int n = classify(bytes, pos, truncated);
    if (n < 0 && truncated) return pos;
    pos += n < 0 ? -n : n;
  }
  return bytes.size();
}

bool is_unicode_whitespace(char32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  switch (cp) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  char_to_byte.fill(0xFFFF);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    byte_to_char[b] = printable ? static_cast<char32_t>(b) : next++;
    char_to_byte[byte_to_char[b]] = static_cast<uint16_t>(b);
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

bool ByteLevelAlphabet::to_bytes(std::string_view token, std::string& out) const {
  out.clear();
  for (size_t pos = 0; pos < token.size();) {
    int len;
    const char32_t cp = utf8_decode(token, pos, len);
    pos += len;
    if (cp >= char_to_byte.size() || char_to_byte[cp] == 0xFFFF) return false;
    out += static_cast<char>(char_to_byte[cp]);
  }
  return true;
}

std::string ByteLevelAlphabet::from_bytes(std::string_view bytes) const {
  std::string out;
  for (unsigned char b : bytes) utf8_append(out, byte_to_char[b]);
  return out;
}

}  // namespace strata::tok
