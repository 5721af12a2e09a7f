#pragma once
// The filters, tests, global functions and Python methods the Jinja subset provides. Errors
// are plain strata Errors; the evaluator adds the template position.
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace strata::jinja {

// Applies filter `name` (e.g. `map`) to `subject`. `call_filter` lets filters that take a
// filter name (map) recurse; `run_test` lets select/reject use tests.
using TestRunner = std::function<bool(const std::string&, const Value&, std::vector<Value>&)>;
Value apply_filter(const std::string& name, const Value& subject, std::vector<Value>& args,
                   Kwargs& kwargs);
bool apply_test(const std::string& name, const Value& subject, std::vector<Value>& args);

// `object.name(args)` for str, list and dict methods; false if `object` has no such method.
bool call_method(const Value& object, const std::string& name, std::vector<Value>& args,
                 Kwargs& kwargs, Value& result);
bool is_method_name(const Value& object, const std::string& name);

// range, namespace, dict, raise_exception, strftime_now.
void add_global_functions(Dict& globals);
// transformers' strftime_now(format): the local time `clock` gives, formatted.
Value strftime_now_function(std::function<std::tm()> clock);

// markupsafe's escape: & < > ' " as entities.
std::string html_escape(const std::string& s);

// Python's str.strip family: `chars` undefined/None means whitespace.
std::string python_strip(const std::string& s, const Value& chars, bool left, bool right);
// Python's str.split: `sep` undefined/None splits on whitespace runs.
List python_split(const std::string& s, const Value& sep, int64_t maxsplit);

// Python's len(); an Error for values without one.
int64_t length_of(const Value& v);
// The items a for loop or a list() call sees: list items, dict keys, string characters.
List iterate(const Value& v);
// obj[key] as Jinja resolves `obj.key` and `obj[key]`; undefined when missing.
Value get_item(const Value& object, const Value& key);

}  // namespace strata::jinja
