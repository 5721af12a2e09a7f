// Jinja lexing: the template into text and tags (with transformers' trim_blocks and
// lstrip_blocks), and a tag's content into expression tokens.
#include <cstring>

#include "core/error.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/unicode.h"

namespace strata::jinja {

void syntax_error(const std::string& source, size_t pos, const std::string& message) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < pos && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  fail("chat template: {} at line {}, column {}", message, line, column);
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// End of the tag whose content starts at `from`: the offset of `close`, skipping string literals.
size_t find_tag_end(const std::string& s, size_t from, const char* close, size_t tag_pos) {
  for (size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\'' || c == '"') {
      for (++i; i < s.size() && s[i] != c; ++i)
        if (s[i] == '\\') ++i;
      continue;
    }
    if (s.compare(i, std::strlen(close), close) == 0) return i;
  }
  syntax_error(s, tag_pos, std::string("tag is never closed (expected '") + close + "')");
}

}  // namespace

std::vector<Chunk> lex_template(const std::string& source) {
  std::vector<Chunk> chunks;
  size_t pos = 0;
  bool strip_next = false;    // the previous tag ended with '-'
  bool line_starting = true;  // the text that follows begins a line (for lstrip_blocks)
  while (pos <= source.size()) {
    size_t open = pos;
    for (;; ++open) {
      open = source.find('{', open);
      if (open == std::string::npos || open + 1 >= source.size()) {
        open = std::string::npos;
        break;
      }
      if (std::string_view("{%#").find(source[open + 1]) != std::string_view::npos) break;
    }
    std::string text =
        source.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (strip_next) {
      size_t k = 0;
      while (k < text.size() && is_space(text[k])) ++k;
      text.erase(0, k);
    }
    if (open == std::string::npos) {
      if (!text.empty()) chunks.push_back({Chunk::Kind::Text, text, pos});
      break;
    }
    const char kind = source[open + 1];
    const char sign = open + 2 < source.size() ? source[open + 2] : '\0';
    if (sign == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (sign != '+' && kind != '{') {
      // lstrip_blocks: spaces and tabs between a line start and a block or comment tag go.
      const size_t line_start = text.rfind('\n');
      const size_t from = line_start == std::string::npos ? 0 : line_start + 1;
      if ((line_start != std::string::npos || line_starting) &&
          text.find_first_not_of(" \t", from) == std::string::npos)
        text.erase(from);
    }
    if (!text.empty()) chunks.push_back({Chunk::Kind::Text, text, pos});

    const size_t content = open + 2 + (sign == '-' || sign == '+' ? 1 : 0);
    const char* close = kind == '{' ? "}}" : (kind == '%' ? "%}" : "#}");
    const size_t end =
        kind == '#' ? source.find("#}", content) : find_tag_end(source, content, close, open);
    if (end == std::string::npos)
      syntax_error(source, open, "comment is never closed (expected '#}')");
    size_t content_end = end;
    const char end_sign = end > content ? source[end - 1] : '\0';
    if (end_sign == '-' || end_sign == '+') --content_end;
    if (kind != '#')
      chunks.push_back({kind == '{' ? Chunk::Kind::Output : Chunk::Kind::Statement,
                        source.substr(content, content_end - content), content});
    pos = end + 2;
    strip_next = end_sign == '-';
    line_starting = false;
    // trim_blocks: the first newline after a block or comment tag goes.
    if (!strip_next && end_sign != '+' && kind != '{' && pos < source.size() &&
        source[pos] == '\n') {
      ++pos;
      line_starting = true;
    }
    if (pos == source.size()) break;
  }
  return chunks;
}

namespace {

// Python string escapes, as Jinja's lexer applies them ("unicode-escape").
std::string unescape(const std::string& source, size_t start, const std::string& body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out += body[i];
      continue;
    }
    const char e = body[++i];
    auto hex = [&](int digits) {
      const std::string h = body.substr(i + 1, digits);
      if (h.size() != static_cast<size_t>(digits) ||
          h.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        syntax_error(source, start + i, "bad \\x/\\u escape in string literal");
      i += digits;
      tok::utf8_append(out, static_cast<char32_t>(std::stoul(h, nullptr, 16)));
    };
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case 'a':
        out += '\a';
        break;
      case '0':
        out += '\0';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case '\n':
        break;
      case 'x':
        hex(2);
        break;
      case 'u':
        hex(4);
        break;
      case 'U':
        hex(8);
        break;
      default:
        out += '\\';
        out += e;
    }
  }
  return out;
}

}  // namespace

std::vector<Token> lex_expression(const std::string& source, const Chunk& chunk) {
  std::vector<Token> tokens;
  const std::string& s = chunk.text;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    const size_t at = chunk.pos + i;
    if (is_space(c)) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      tokens.push_back({Token::Kind::Name, s.substr(i, j - i), 0, 0, at});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      bool is_float = false;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        for (++j; j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])); ++j) {
        }
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          for (j = k; j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])); ++j) {
          }
        }
      }
      std::string digits;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_') digits += s[k];
      Token t{is_float ? Token::Kind::Float : Token::Kind::Int, digits, 0, 0, at};
      try {
        if (is_float)
          t.float_value = std::stod(digits);
        else
          t.int_value = std::stoll(digits);
      } catch (const std::exception&) {
        syntax_error(source, at, "number literal '" + digits + "' is out of range");
      }
      tokens.push_back(t);
      i = j;
    } else if (c == '\'' || c == '"') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != c) j += s[j] == '\\' ? 2 : 1;
      if (j >= s.size()) syntax_error(source, at, "string literal is never closed");
      tokens.push_back(
          {Token::Kind::String, unescape(source, at + 1, s.substr(i + 1, j - i - 1)), 0, 0, at});
      i = j + 1;
    } else {
      static const char* const kOps[] = {"==", "!=", "<=", ">=", "//", "**", "<", ">", "+",
                                         "-",  "*",  "/",  "%",  "~",  "|",  ".", ",", ":",
                                         "(",  ")",  "[",  "]",  "{",  "}",  "="};
      bool matched = false;
      for (const char* op : kOps) {
        const size_t n = std::strlen(op);
        if (s.compare(i, n, op) == 0) {
          tokens.push_back({Token::Kind::Op, op, 0, 0, at});
          i += n;
          matched = true;
          break;
        }
      }
      if (!matched) syntax_error(source, at, std::string("unexpected character '") + c + "'");
    }
  }
  tokens.push_back({Token::Kind::End, "", 0, 0, chunk.pos + s.size()});
  return tokens;
}

}  // namespace strata::jinja
