#include "server/grammar_fields.h"

#include <fmt/format.h>

#include "grammar/grammar_compiler.h"
#include "server/request_parsing.h"

namespace strata {

namespace {

using grammar::GrammarSpec;

std::shared_ptr<grammar::CompiledGrammar> compile(const ServerContext& ctx, const GrammarSpec& spec,
                                                  const std::string& field) {
  if (!ctx.grammars)
    throw HttpError(
        400,
        fmt::format("'{}': structured output is not available: {}", field, ctx.grammar_unavailable),
        field);
  try {
    return ctx.grammars->compile(spec);
  } catch (const grammar::GrammarError& e) {
    throw HttpError(400, fmt::format("'{}': {}", field, e.what()), field);
  }
}

// The constraint fields present in `obj` (non-null), as (field, spec).
template <typename Json>
std::vector<std::pair<std::string, GrammarSpec>> plain_constraints(const Json& obj) {
  std::vector<std::pair<std::string, GrammarSpec>> out;
  for (const auto& [key, kind] :
       {std::pair{"regex", GrammarSpec::Kind::Regex}, std::pair{"ebnf", GrammarSpec::Kind::Ebnf}}) {
    if (!obj.contains(key) || obj[key].is_null()) continue;
    if (!obj[key].is_string())
      throw HttpError(400, fmt::format("'{}' must be a string, got {}", key, obj[key].dump()), key);
    out.push_back({key, {kind, obj[key].template get<std::string>()}});
  }
  return out;
}

[[noreturn]] void more_than_one(const std::vector<std::string>& fields) {
  throw HttpError(400,
                  fmt::format("a request takes one structured-output constraint, got {}; send "
                              "only one of response_format, regex, json_schema, ebnf",
                              fmt::join(fields, " and ")),
                  fields.back());
}

}  // namespace

std::shared_ptr<grammar::CompiledGrammar> read_openai_grammar(const ServerContext& ctx,
                                                              const ordered_json& body) {
  auto constraints = plain_constraints(body);
  if (body.contains("response_format") && !body["response_format"].is_null()) {
    const ordered_json& rf = body["response_format"];
    const std::string type = rf.is_object() && rf.contains("type") && rf["type"].is_string()
                                 ? rf["type"].get<std::string>()
                                 : "";
    if (type == "json_object") {
      constraints.push_back({"response_format", {GrammarSpec::Kind::JsonObject, ""}});
    } else if (type == "json_schema") {
      if (!rf.contains("json_schema") || !rf["json_schema"].is_object() ||
          !rf["json_schema"].contains("schema") ||
          !(rf["json_schema"]["schema"].is_object() || rf["json_schema"]["schema"].is_boolean()))
        throw HttpError(400,
                        "'response_format' of type json_schema needs \"json_schema\": {\"name\": "
                        "..., \"schema\": {...}}",
                        "response_format");
      constraints.push_back(
          {"response_format", {GrammarSpec::Kind::JsonSchema, rf["json_schema"]["schema"].dump()}});
    } else if (type != "text") {
      throw HttpError(
          400,
          fmt::format("'response_format' type must be text, json_object or "
                      "json_schema, got {}",
                      rf.is_object() && rf.contains("type") ? rf["type"].dump() : rf.dump()),
          "response_format");
    }
  }
  if (constraints.empty()) return nullptr;
  if (constraints.size() > 1) more_than_one({constraints[0].first, constraints[1].first});
  return compile(ctx, constraints[0].second, constraints[0].first);
}

std::shared_ptr<grammar::CompiledGrammar> compile_json_schema(const ServerContext& ctx,
                                                              const std::string& schema,
                                                              const std::string& field) {
  return compile(ctx, {GrammarSpec::Kind::JsonSchema, schema}, field);
}

std::shared_ptr<grammar::CompiledGrammar> read_generate_grammar(const ServerContext& ctx,
                                                                const ordered_json& sp) {
  if (!sp.is_object()) return nullptr;
  auto constraints = plain_constraints(sp);
  if (sp.contains("json_schema") && !sp["json_schema"].is_null()) {
    const ordered_json& js = sp["json_schema"];
    if (!js.is_string() && !js.is_object())
      throw HttpError(400, "'json_schema' must be a JSON schema, as a string or an object",
                      "json_schema");
    constraints.push_back(
        {"json_schema",
         {GrammarSpec::Kind::JsonSchema, js.is_string() ? js.get<std::string>() : js.dump()}});
  }
  if (constraints.empty()) return nullptr;
  if (constraints.size() > 1) more_than_one({constraints[0].first, constraints[1].first});
  return compile(ctx, constraints[0].second, constraints[0].first);
}

}  // namespace strata
