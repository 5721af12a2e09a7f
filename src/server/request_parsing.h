#pragma once
// Reading request bodies: typed field access that turns every mistake into an HttpError
// naming the field, what it should be and what came instead (served as an OpenAI-style
// JSON error with a 4xx status).
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/json_util.h"

namespace strata {

struct HttpError : std::runtime_error {
  HttpError(int status, std::string message, std::string param = "",
            std::string type = "invalid_request_error")
      : std::runtime_error(std::move(message)),
        status(status),
        param(std::move(param)),
        type(std::move(type)) {}
  int status;
  std::string param, type;
};

// {"error": {"message", "type", "param", "code"}}, as OpenAI sends it.
std::string error_body(int status, const std::string& message,
                       const std::string& type = "invalid_request_error",
                       const std::string& param = "");

bool is_valid_utf8(const std::string& s);
// The body as a JSON object (400 for invalid UTF-8, malformed JSON, or not an object).
json parse_body(const std::string& body);
// 400 naming the first key of `obj` not in `known`.
void reject_unknown_fields(const json& obj, const std::set<std::string>& known,
                           const std::string& where);

// Optional typed fields: nullopt when absent or null; 400 when of the wrong type.
std::optional<int64_t> get_integer(const json& obj, const std::string& key);
std::optional<double> get_number(const json& obj, const std::string& key);
std::optional<bool> get_bool(const json& obj, const std::string& key);
std::optional<std::string> get_string(const json& obj, const std::string& key);
// A string or a list of strings.
std::vector<std::string> get_string_or_list(const json& obj, const std::string& key);
// A list of integers (token ids); `what` names it in errors.
std::vector<int> to_token_ids(const json& v, const std::string& what);

}  // namespace strata
