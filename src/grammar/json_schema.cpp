#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "grammar/ebnf.h"
#include "grammar/regex_rules.h"

namespace strata::grammar {

namespace {

using json = nlohmann::ordered_json;

// The generic JSON rules that typed rules fall back on. Numbers are bounded to what every
// parser reads back exactly: at most 15 integer digits (below 2^53, so int64 and double agree),
// 15 fraction digits and a two-digit exponent; beyond that parsers differ (overflow to a
// double, to infinity, or an error), and a client would fail on valid JSON.
constexpr const char* kJsonRules = R"(
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" ( json-string ":" json-value ( "," json-string ":" json-value )* )? "}"
json-array ::= "[" ( json-value ( "," json-value )* )? "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-number ::= json-integer ( "." [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?
json-integer ::= "-"? ( "0" | [1-9] [0-9]{0,14} )
)";

// String formats as whole-match regexes.
const std::map<std::string, std::string>& format_patterns() {
  static const std::map<std::string, std::string> formats = [] {
    const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
    const std::string time =
        "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-"
        "9])";
    return std::map<std::string, std::string>{
        {"date", date},
        {"time", time},
        {"date-time", date + "T" + time},
        {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
        {"email",
         "[a-zA-Z0-9._%+-]{1,64}@[a-zA-Z0-9-]{1,63}(\\.[a-zA-Z0-9-]{1,63}){0,4}\\.[a-zA-Z]{2,6}"},
        {"ipv4",
         "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-"
         "9]?[0-9])"},
    };
  }();
  return formats;
}

const std::set<std::string>& known_keywords() {
  static const std::set<std::string> keys = {
      "type",        "properties", "required",    "additionalProperties",
      "items",       "minItems",   "maxItems",    "enum",
      "const",       "pattern",    "format",      "minLength",
      "maxLength",   "anyOf",      "$ref",        "$defs",
      "definitions", "title",      "description", "default",
      "examples",    "$schema",    "$id",         "$comment"};
  return keys;
}

// `bytes` as an EBNF string literal.
std::string ebnf_literal(const std::string& bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) {}

  Grammar compile() {
    const std::string top = rule_for(root_, "");
    add_ebnf_rules(builder_, kJsonRules);
    add_ebnf_rules(builder_, "root ::= " + top + "\n" + rules_);
    return std::move(builder_).finish(builder_.declare("root"));
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw GrammarError(fmt::format("json_schema at '{}': {}", path.empty() ? "/" : path, what));
  }

  std::string new_rule(const std::string& body) {
    const std::string name = fmt::format("s-{}", count_++);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  const json& resolve(const std::string& ref, const std::string& path) {
    if (ref == "#") return root_;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (ref.rfind(p, 0) == 0) {
        const std::string key = p.substr(2, p.size() - 3);
        const std::string name = ref.substr(p.size());
        if (root_.contains(key) && root_[key].contains(name)) return root_[key][name];
        fail(path, fmt::format("$ref '{}' names no definition in {}", ref, key));
      }
    }
    fail(path, fmt::format("$ref '{}' is not supported; use '#', '#/$defs/NAME' or "
                           "'#/definitions/NAME'",
                           ref));
  }

  // The name of a rule matching the JSON texts that `s` accepts.
  std::string rule_for(const json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return "json-value";
      fail(path, "the schema 'false' accepts nothing");
    }
    if (!s.is_object()) fail(path, fmt::format("a schema must be an object, not {}", s.dump()));
    for (const auto& [key, value] : s.items())
      if (!known_keywords().count(key))
        fail(path, fmt::format("keyword '{}' is not supported; supported: type, properties, "
                               "required, additionalProperties, items, minItems, maxItems, "
                               "enum, const, pattern, format, minLength, maxLength, anyOf, "
                               "$ref, $defs",
                               key));
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"].get<std::string>();
      if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
      // Named before it is generated, so that recursive schemas refer back to it.
      const std::string name = fmt::format("ref-{}", count_++);
      refs_[ref] = name;
      const std::string target = rule_for(resolve(ref, path), path + "/$ref");
      rules_ += name + " ::= " + target + "\n";
      return name;
    }
    if (s.contains("const")) return new_rule(ebnf_literal(s["const"].dump()));
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        fail(path, "'enum' must be a non-empty array");
      std::string body;
      for (const json& v : s["enum"]) body += (body.empty() ? "" : " | ") + ebnf_literal(v.dump());
      return new_rule(body);
    }
    if (s.contains("anyOf")) {
      if (!s["anyOf"].is_array() || s["anyOf"].empty())
        fail(path, "'anyOf' must be a non-empty array");
      std::string body;
      for (size_t k = 0; k < s["anyOf"].size(); ++k)
        body += (k ? " | " : "") + rule_for(s["anyOf"][k], fmt::format("{}/anyOf/{}", path, k));
      return new_rule(body);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (s["type"].is_string())
        types.push_back(s["type"]);
      else if (s["type"].is_array())
        for (const json& t : s["type"]) types.push_back(t.get<std::string>());
      else
        fail(path, "'type' must be a string or an array of strings");
    } else if (s.contains("properties")) {
      types = {"object"};
    } else if (s.contains("items")) {
      types = {"array"};
    } else if (s.contains("pattern") || s.contains("format")) {
      types = {"string"};
    } else {
      return "json-value";
    }
    std::string body;
    for (const std::string& t : types) body += (body.empty() ? "" : " | ") + typed(s, t, path);
    return types.size() == 1 ? body : new_rule(body);
  }

  std::string typed(const json& s, const std::string& type, const std::string& path) {
    if (type == "object") return object_rule(s, path);
    if (type == "array") return array_rule(s, path);
    if (type == "string") return string_rule(s, path);
    if (type == "number") return "json-number";
    if (type == "integer") return "json-integer";
    if (type == "boolean") return new_rule(R"("true" | "false")");
    if (type == "null") return new_rule(R"("null")");
    fail(path, fmt::format("type '{}' is not one of object, array, string, number, integer, "
                           "boolean, null",
                           type));
  }

  std::string object_rule(const json& s, const std::string& path) {
    if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean())
      fail(path, "keyword 'additionalProperties' with a schema is not supported; use false");
    if (!s.contains("properties")) {
      const bool closed =
          s.contains("additionalProperties") && !s["additionalProperties"].get<bool>();
      return closed ? new_rule(R"("{" "}")") : "json-object";
    }
    const json& props = s["properties"];
    std::set<std::string> required;
    if (s.contains("required"))
      for (const json& r : s["required"]) {
        if (!props.contains(r.get<std::string>()))
          fail(path, fmt::format("'required' names '{}', which is not in 'properties'",
                                 r.get<std::string>()));
        required.insert(r.get<std::string>());
      }
    // tail_first[i] / tail_after[i]: properties i.. with nothing / something emitted before
    // (the latter puts a comma before each). Optional properties may be skipped.
    std::vector<std::string> names;
    std::vector<std::string> pairs;
    for (const auto& [name, sub] : props.items()) {
      names.push_back(name);
      pairs.push_back(ebnf_literal(json(name).dump()) + " \":\" " +
                      rule_for(sub, path + "/properties/" + name));
    }
    std::string first = "\"\"", after = "\"\"";
    for (size_t i = names.size(); i-- > 0;) {
      const bool optional = !required.count(names[i]);
      const std::string new_after =
          new_rule("\",\" " + pairs[i] + " " + after + (optional ? " | " + after : ""));
      const std::string new_first =
          new_rule(pairs[i] + " " + after + (optional ? " | " + first : ""));
      first = new_first, after = new_after;
    }
    return new_rule("\"{\" " + first + " \"}\"");
  }

  std::string array_rule(const json& s, const std::string& path) {
    const std::string item =
        s.contains("items") ? rule_for(s["items"], path + "/items") : "json-value";
    const int lo = s.value("minItems", 0);
    const int hi = s.contains("maxItems") ? s["maxItems"].get<int>() : -1;
    if (lo < 0 || (hi >= 0 && hi < lo))
      fail(path, fmt::format("minItems {} and maxItems {} admit no array", lo, hi));
    if (lo > 1000 || hi > 1000) fail(path, "minItems/maxItems above 1000 are not supported");
    if (hi == 0) return new_rule(R"("[" "]")");
    const std::string rest_hi = hi < 0 ? "" : std::to_string(hi - 1);
    const std::string rest =
        fmt::format("( \",\" {} ){{{},{}}}", item, lo > 0 ? lo - 1 : 0, rest_hi);
    if (lo == 0) return new_rule(fmt::format("\"[\" ( {} {} )? \"]\"", item, rest));
    return new_rule(fmt::format("\"[\" {} {} \"]\"", item, rest));
  }

  std::string string_rule(const json& s, const std::string& path) {
    std::string pattern;
    if (s.contains("format")) {
      const std::string f = s["format"].get<std::string>();
      auto it = format_patterns().find(f);
      if (it == format_patterns().end())
        fail(path, fmt::format("format '{}' is not supported; supported: date, time, "
                               "date-time, uuid, email, ipv4",
                               f));
      pattern = it->second;
    }
    if (s.contains("pattern")) {
      if (!pattern.empty()) fail(path, "'pattern' together with 'format' is not supported");
      pattern = s["pattern"].get<std::string>();
      if (!pattern.empty() && pattern.back() == '$') pattern.pop_back();
      if (!pattern.empty() && pattern.front() == '^') pattern.erase(0, 1);
    }
    const bool bounded = s.contains("minLength") || s.contains("maxLength");
    if (!pattern.empty()) {
      if (bounded) fail(path, "'minLength'/'maxLength' together with 'pattern' are not supported");
      const uint32_t regex = compile_regex(builder_, pattern, {.json_string = true});
      const std::string name = fmt::format("pattern-{}", count_++);
      builder_.add_alternative(builder_.declare(name), {GrammarBuilder::ref(regex)});
      return new_rule("\"\\\"\" " + name + " \"\\\"\"");
    }
    if (!bounded) return "json-string";
    const int lo = s.value("minLength", 0);
    const int hi = s.contains("maxLength") ? s["maxLength"].get<int>() : -1;
    if (lo < 0 || (hi >= 0 && hi < lo) || lo > 1000 || hi > 1000)
      fail(path, fmt::format("minLength {} / maxLength {} are not supported (0..1000, min <= max)",
                             lo, hi));
    return new_rule(
        fmt::format("\"\\\"\" json-char{{{},{}}} \"\\\"\"", lo, hi < 0 ? "" : std::to_string(hi)));
  }

  const json& root_;
  GrammarBuilder builder_;
  std::string rules_;
  std::map<std::string, std::string> refs_;
  int count_ = 0;
};

}  // namespace

Grammar compile_json_schema(const json& schema) {
  try {
    return SchemaCompiler(schema).compile();
  } catch (const json::exception& e) {
    throw GrammarError(fmt::format("json_schema is malformed: {}", e.what()));
  }
}

Grammar json_object_grammar() {
  GrammarBuilder builder;
  add_ebnf_rules(builder, kJsonRules);
  return std::move(builder).finish(builder.declare("json-object"));
}

}  // namespace strata::grammar
