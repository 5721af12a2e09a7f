#pragma once
// The schema suite that tests and the mask benchmark share: nested objects, arrays, enums,
// numbers, string patterns and formats, $ref and anyOf; and a validator for the keywords it
// uses (an independent check of what the grammar emitted). Strings carry maxLength or a
// pattern: uniform draws over 150k tokens would almost never close a free-form string.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace strata::grammar::suite {

struct SchemaCase {
  std::string name;
  std::string schema;
};

inline const std::vector<SchemaCase>& schemas() {
  static const std::vector<SchemaCase> cases = {
      {"person", R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
         "age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string","maxLength":6},
         "maxItems":3}},"required":["name","age"],"additionalProperties":false})"},
      {"nested", R"({"type":"object","properties":{"id":{"type":"integer"},"address":{
         "type":"object","properties":{"street":{"type":"string","pattern":"^[0-9]{1,4} [A-Z][a-z]{2,8}$"},
         "city":{"enum":["Paris","Oslo","Lima"]},"zip":{"type":["string","null"],"maxLength":5}},
         "required":["street","city","zip"],"additionalProperties":false}},
         "required":["id","address"],"additionalProperties":false})"},
      {"arrays",
       R"({"type":"object","properties":{"values":{"type":"array","items":{"type":"number"},
         "minItems":1,"maxItems":4},"matrix":{"type":"array","items":{"type":"array","items":
         {"type":"integer"},"maxItems":2},"maxItems":2}},"required":["values","matrix"],
         "additionalProperties":false})"},
      {"enums", R"({"type":"object","properties":{"color":{"enum":["red","green","blue"]},
         "size":{"enum":[1,2.5,"XL",null,true]},"kind":{"const":"shirt"}},
         "required":["color","size","kind"],"additionalProperties":false})"},
      {"refs", R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
         "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],
         "additionalProperties":false}},"$ref":"#/$defs/node"})"},
      {"patterns",
       R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2}$"},
         "day":{"type":"string","format":"date"},"uid":{"type":"string","format":"uuid"},
         "ok":{"type":"boolean"}},"required":["code","day","uid","ok"],"additionalProperties":false})"},
      {"any_of", R"({"type":"object","properties":{"result":{"anyOf":[{"type":"object","properties":
         {"error":{"type":"string","maxLength":8}},"required":["error"],"additionalProperties":false},
         {"type":"array","items":{"type":"boolean"},"maxItems":3},{"type":"number"}]}},
         "required":["result"],"additionalProperties":false})"},
  };
  return cases;
}

inline bool pattern_search(const std::string& pattern, const std::string& s) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF, &error, &offset, nullptr);
  if (!code) return false;
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
  const bool ok =
      pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, data, nullptr) >= 0;
  pcre2_match_data_free(data);
  pcre2_code_free(code);
  return ok;
}

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// "" when `v` satisfies `s` (resolved against `root`), else the first problem found.
inline std::string validate(const nlohmann::json& v, const nlohmann::json& s,
                            const nlohmann::json& root) {
  using nlohmann::json;
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    const std::string name = ref.substr(ref.rfind('/') + 1);
    return validate(v, ref == "#" ? root : root["$defs"][name], root);
  }
  if (s.contains("const") && v != s["const"]) return "const " + v.dump();
  if (s.contains("enum")) {
    bool found = false;
    for (const json& e : s["enum"]) found |= e == v;
    if (!found) return "enum " + v.dump();
  }
  if (s.contains("anyOf")) {
    for (const json& alt : s["anyOf"])
      if (validate(v, alt, root).empty()) return "";
    return "anyOf " + v.dump();
  }
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string())
      types.push_back(s["type"]);
    else
      for (const json& t : s["type"]) types.push_back(t);
    bool ok = false;
    for (const std::string& t : types)
      ok |= (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
            (t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
            (t == "integer" && v.is_number_integer()) || (t == "boolean" && v.is_boolean()) ||
            (t == "null" && v.is_null());
    if (!ok) return "type " + v.dump();
  }
  if (v.is_object() && s.contains("properties")) {
    for (const json& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return "missing " + r.get<std::string>();
    for (const auto& [k, sub] : v.items()) {
      if (!s["properties"].contains(k)) {
        if (s.value("additionalProperties", true) == false) return "extra property " + k;
        continue;
      }
      if (std::string p = validate(sub, s["properties"][k], root); !p.empty()) return k + ": " + p;
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return "minItems";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return "maxItems";
    if (s.contains("items"))
      for (const json& item : v)
        if (std::string p = validate(item, s["items"], root); !p.empty()) return "item: " + p;
  }
  if (v.is_string()) {
    const std::string str = v;
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>())
      return "maxLength";
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>())
      return "minLength";
    if (s.contains("pattern") && !pattern_search(s["pattern"], str)) return "pattern " + str;
    if (s.value("format", "") == "date" && !pattern_search("^\\d{4}-\\d{2}-\\d{2}$", str))
      return "date " + str;
    if (s.value("format", "") == "uuid" &&
        !pattern_search("^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$", str))
      return "uuid " + str;
  }
  return "";
}

}  // namespace strata::grammar::suite
