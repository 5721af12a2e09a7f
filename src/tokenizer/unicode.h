#pragma once
// UTF-8 and the GPT-2 byte-level alphabet: the small pieces of Unicode handling that the
// tokenizer pipeline needs beyond what PCRE2 (regexes) and utf8proc (normalization) give.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::tok {

constexpr char32_t kReplacementChar = 0xFFFD;

// Length in bytes of the UTF-8 sequence that starts with `lead` (1 for a stray byte).
int utf8_sequence_length(unsigned char lead);

// Decodes the code point at text[pos]; sets `len` to its byte length. Only for valid UTF-8.
char32_t utf8_decode(std::string_view text, size_t pos, int& len);
void utf8_append(std::string& out, char32_t cp);

// Byte offset of the first invalid UTF-8 sequence in `text`, or npos if it is all valid.
size_t utf8_first_invalid(std::string_view text);

// Bytes to text the way Rust's String::from_utf8_lossy does (and so Hugging Face decoders):
// every maximal invalid subpart becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// Length of the longest prefix of `bytes` that cannot change when more bytes are appended:
// everything but a trailing, still-completable multi-byte sequence.
size_t utf8_stable_prefix(std::string_view bytes);

// Unicode White_Space (what Rust's char::is_whitespace and the \s of Hugging Face's regexes
// match).
bool is_unicode_whitespace(char32_t cp);

// GPT-2's reversible map from bytes to printable code points ("Ġ" for space, ...).
struct ByteLevelAlphabet {
  std::array<char32_t, 256> byte_to_char{};
  // Code points below 324 only; 0xFFFF marks "not in the alphabet".
  std::array<uint16_t, 324> char_to_byte{};
  ByteLevelAlphabet();
  static const ByteLevelAlphabet& get();
  // The raw bytes a byte-level token stands for; false if it holds a non-alphabet char.
  bool to_bytes(std::string_view token, std::string& out) const;
  std::string from_bytes(std::string_view bytes) const;
};

}  // namespace strata::tok
