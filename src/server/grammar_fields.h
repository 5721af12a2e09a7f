#pragma once
// Structured-output fields of a request, read and compiled (grammar/grammar_compiler.h):
//  - OpenAI routes: response_format {"type": "text" | "json_object" | "json_schema",
//    "json_schema": {"name", "schema", "strict", "description"}}, and SGLang's extra top-level
//    `regex` and `ebnf`;
//  - /generate: sampling_params `json_schema` (JSON text, as SGLang sends it, or an object),
//    `regex`, `ebnf`. Both read the body as written (ordered_json).
// At most one constraint per request. A constraint that does not compile is a 400 naming the
// field and what the engine refused (for schemas: the keyword and where it is).
#include <memory>

#include "server/serving.h"

namespace strata {

// Null when the request has no constraint. `body` as written (ordered), so that a schema's
// properties keep their order (the output follows it, as OpenAI's does).
std::shared_ptr<grammar::CompiledGrammar> read_openai_grammar(const ServerContext& ctx,
                                                              const ordered_json& body);
// A JSON schema (text) compiled; a 400 naming `field` when it does not compile.
std::shared_ptr<grammar::CompiledGrammar> compile_json_schema(const ServerContext& ctx,
                                                              const std::string& schema,
                                                              const std::string& field);
std::shared_ptr<grammar::CompiledGrammar> read_generate_grammar(
    const ServerContext& ctx, const ordered_json& sampling_params);

}  // namespace strata
