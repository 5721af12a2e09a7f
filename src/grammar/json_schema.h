#pragma once
// JSON Schema compiled into the grammar form (through EBNF rules plus regex rules for string
// patterns). The output is compact JSON (no whitespace between tokens), properties in the
// schema's order, so every accepted text parses and validates against the schema. Numbers
// have at most 15 integer digits, 15 fraction digits and a two-digit exponent (json_schema.cpp).
//
// Supported (OpenAI's strict-mode subset): type (one or a list), properties, required,
// additionalProperties (false, true or absent: only listed properties are generated), items,
// minItems, maxItems, enum, const, string pattern (matched whole; characters JSON must escape
// are left out), minLength/maxLength, format (date, time, date-time, uuid, email, ipv4), number,
// integer, boolean, null, anyOf, $ref to #, #/$defs/NAME or #/definitions/NAME, and the
// annotations title, description, default, examples, $schema, $id, $comment. Any other
// keyword is refused by name (GrammarError), never silently ignored.
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace strata::grammar {

Grammar compile_json_schema(const nlohmann::ordered_json& schema);

// response_format json_object: any JSON object.
Grammar json_object_grammar();

}  // namespace strata::grammar
