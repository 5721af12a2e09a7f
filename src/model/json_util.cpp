#include "model/json_util.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace strata {

namespace {

bool token_at(const std::string& s, size_t i, const char* tok) {
  const size_t n = std::char_traits<char>::length(tok);
  if (s.compare(i, n, tok) != 0) return false;
  // Must stand alone: not part of an identifier-like run.
  const bool left_ok = i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1]));
  const bool right_ok = i + n >= s.size() || !std::isalnum(static_cast<unsigned char>(s[i + n]));
  return left_ok && right_ok;
}

std::string rewrite_nonfinite_literals(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  bool in_string = false;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < in.size()) {
        out += in[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
    } else if (token_at(in, i, "-Infinity")) {
      out += R"({"__float__": "-Infinity"})";
      i += 8;
    } else if (token_at(in, i, "Infinity")) {
      out += R"({"__float__": "Infinity"})";
      i += 7;
    } else if (token_at(in, i, "NaN")) {
      out += R"({"__float__": "NaN"})";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

json parse_json_lenient(const std::string& text, const std::string& what) {
  try {
    return json::parse(rewrite_nonfinite_literals(text));
  } catch (const json::exception& e) {  // parse_error, out_of_range (a number like 1e999)
    fail("{} is not valid JSON: {}. Fix or re-download the file.", what, e.what());
  }
}

json read_json_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read {}: the file is missing or unreadable", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_json_lenient(ss.str(), path);
}

std::optional<double> json_number(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (it->is_number()) return it->get<double>();
  if (it->is_object() && it->contains("__float__") && (*it)["__float__"].is_string()) {
    const std::string v = (*it)["__float__"];
    if (v == "Infinity" || v == "inf") return std::numeric_limits<double>::infinity();
    if (v == "-Infinity" || v == "-inf") return -std::numeric_limits<double>::infinity();
    if (v == "NaN" || v == "nan") return std::numeric_limits<double>::quiet_NaN();
    try {
      return std::stod(v);
    } catch (...) {
    }
  }
  fail("config field '{}' should be a number but is {}", key, it->dump());
}

}  // namespace strata
