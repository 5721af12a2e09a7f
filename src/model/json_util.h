#pragma once
// JSON as Hugging Face writes it. Python's json module emits bare `Infinity`, `-Infinity`
// and `NaN`, which strict parsers (nlohmann included) reject; transformers 5 writes
// `{"__float__": "Infinity"}` instead. We rewrite the bare tokens into the second form
// (outside string literals only) and read numbers through `json_number`, which accepts both.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace strata {

using json = nlohmann::json;

// Parses `text`; `what` names the source in error messages ("config.json in DIR").
json parse_json_lenient(const std::string& text, const std::string& what);
json read_json_file(const std::string& path);

// A number, or {"__float__": "Infinity" | "-Infinity" | "NaN"}; nullopt for null/missing.
std::optional<double> json_number(const json& obj, const std::string& key);

}  // namespace strata
