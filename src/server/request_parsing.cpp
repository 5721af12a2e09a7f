#include "server/request_parsing.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>
#include <cmath>

namespace strata {

namespace {
std::string type_name(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}
[[noreturn]] void wrong_type(const std::string& key, const std::string& want, const json& got) {
  throw HttpError(400, fmt::format("'{}' must be {}, got {}", key, want, type_name(got)), key);
}
}  // namespace

std::string error_body(int status, const std::string& message, const std::string& type,
                       const std::string& param) {
  json e = {{"message", message}, {"type", type}, {"code", status}};
  e["param"] = param.empty() ? json() : json(param);
  return json{{"object", "error"}, {"error", e}}.dump();
}

bool is_valid_utf8(const std::string& s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c >> 5) == 0x6) {
      len = 2, cp = c & 0x1f;
    } else if ((c >> 4) == 0xe) {
      len = 3, cp = c & 0x0f;
    } else if ((c >> 3) == 0x1e) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    // overlong forms, surrogates, beyond U+10FFFF
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return false;
    i += len;
  }
  return true;
}

json parse_body(const std::string& body) {
  if (!is_valid_utf8(body)) throw HttpError(400, "the request body is not valid UTF-8");
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw HttpError(400, fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object())
    throw HttpError(400,
                    fmt::format("the request body must be a JSON object, got {}", type_name(j)));
  return j;
}

void reject_unknown_fields(const json& obj, const std::set<std::string>& known,
                           const std::string& where) {
  for (const auto& [key, value] : obj.items())
    if (!known.count(key))
      throw HttpError(400,
                      fmt::format("unknown field '{}' in {}; known fields: {}", key, where,
                                  fmt::format("{}", fmt::join(known, ", "))),
                      key);
}

std::optional<int64_t> get_integer(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (it->is_number_integer() || it->is_number_unsigned()) {
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw HttpError(400, fmt::format("'{}' is too large", key), key);
    return it->get<int64_t>();
  }
  if (it->is_number_float()) {  // 16.0 is an integer too
    const double d = it->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15)
      return static_cast<int64_t>(d);
  }
  wrong_type(key, "an integer", *it);
}

std::optional<double> get_number(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) wrong_type(key, "a number", *it);
  return it->get<double>();
}

std::optional<bool> get_bool(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) wrong_type(key, "true or false", *it);
  return it->get<bool>();
}

std::optional<std::string> get_string(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) wrong_type(key, "a string", *it);
  return it->get<std::string>();
}

std::vector<std::string> get_string_or_list(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (it->is_string()) return {it->get<std::string>()};
  if (!it->is_array()) wrong_type(key, "a string or a list of strings", *it);
  std::vector<std::string> out;
  for (const auto& x : *it) {
    if (!x.is_string()) wrong_type(key, "a string or a list of strings", x);
    out.push_back(x.get<std::string>());
  }
  return out;
}

std::vector<int> to_token_ids(const json& v, const std::string& what) {
  if (!v.is_array()) wrong_type(what, "a list of token ids", v);
  std::vector<int> ids;
  ids.reserve(v.size());
  for (const auto& x : v) {
    if (!(x.is_number_integer() || x.is_number_unsigned()))
      throw HttpError(
          400, fmt::format("'{}' must hold integer token ids, found {}", what, type_name(x)), what);
    const int64_t id =
        x.is_number_unsigned() && x.get<uint64_t>() > INT32_MAX ? INT64_MAX : x.get<int64_t>();
    if (id < INT32_MIN || id > INT32_MAX)
      throw HttpError(400, fmt::format("'{}' holds {}, which is not a token id", what, x.dump()),
                      what);
    ids.push_back(static_cast<int>(id));
  }
  return ids;
}

}  // namespace strata
