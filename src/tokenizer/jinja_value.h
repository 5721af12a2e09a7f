#pragma once
// Values of the Jinja2 subset strata renders chat templates with. They follow Python's
// semantics where templates can observe them: lists and dicts are shared by reference
// (so `list.append` and `namespace` attributes mutate in place), dicts keep insertion order,
// `str()` of a value is Python's, and undefined values are falsy and print as nothing but
// fail loudly when used in arithmetic or called.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace strata::jinja {

class Value;
using List = std::vector<Value>;
// Insertion-ordered string-keyed map: templates see few keys, so lookup is linear. Integer
// keys (Python's {1: ...}, rare in templates) are kept as their decimal text and marked, so
// that keys() and items() give them back as ints; d[1] and d['1'] are then the same entry.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  std::vector<std::string> int_keys;  // the keys of `items` that are integers
  bool is_namespace = false;          // made by namespace(): attributes may be assigned
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
  void set_int(int64_t key, Value value);
  Value key(const std::string& k) const;  // the key as the template wrote it (str or int)
};
struct Kwargs;
using Function = std::function<Value(std::vector<Value>& args, Kwargs& kwargs)>;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

  Value() = default;  // undefined
  static Value none();
  Value(bool b);
  Value(int64_t i);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  Value(List list);
  Value(Dict dict);
  static Value function(std::string name, Function f);
  // What Jinja2's map, select, reject, selectattr, rejectattr and unique return: a Python
  // generator. It iterates (for, list, join, first, ...) as its items, but is always truthy and
  // has no len(), no JSON and no printable form, so that a template relying on those fails here
  // as it does in transformers.
  static Value generator(List items);
  // A string made by the `safe` or `escape` filter: markupsafe's Markup. `+` with a plain string
  // HTML-escapes that string (Markup.__add__), which templates writing `"x"|safe + name` rely on.
  static Value markup(std::string s);
  // Objects keep their key order: nlohmann::json's sorted, ordered_json's as written (a
  // request's tools and messages, so that `tojson` writes them as Python's json.dumps does).
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_generator() const { return generator_; }
  bool is_markup() const { return markup_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_number() const { return kind_ == Kind::Int ? static_cast<double>(i_) : d_; }
  const std::string& as_string() const { return *s_; }
  List& as_list() const { return *list_; }
  Dict& as_dict() const { return *dict_; }
  const Function& as_function() const { return *fn_; }
  const std::string& function_name() const { return *s_; }

  bool truthy() const;
  // Python's str(); undefined prints as "".
  std::string str() const;
  // Python's repr() (strings quoted), used inside str() of lists and dicts.
  std::string repr() const;
  // json.dumps as transformers' tojson filter calls it: ensure_ascii=False unless asked,
  // indent, separators (item, key; Python's defaults: ", " and ": ", "," with an indent),
  // sort_keys.
  struct JsonStyle {
    int indent = -1;  // -1: none
    std::string item_sep = ", ", key_sep = ": ";
    bool sort_keys = false, ensure_ascii = false;
  };
  std::string to_json(int indent = -1, int depth = 0) const;
  std::string to_json(const JsonStyle& style, int depth = 0) const;
  // Python's type name, for error messages.
  std::string type_name() const;

  bool operator==(const Value& o) const;

 private:
  Kind kind_ = Kind::Undefined;
  bool generator_ = false;  // a List made by a lazy filter
  bool markup_ = false;     // a String made by safe / escape
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

struct Kwargs {
  std::vector<std::pair<std::string, Value>> items;
  // Removes and returns `name`, or undefined.
  Value take(const std::string& name);
};

// Python's comparison order for numbers and strings; an Error for other pairs.
int compare(const Value& a, const Value& b);

// Code points of a UTF-8 string and back (Python indexes strings by code point).
std::u32string to_u32(const std::string& s);
std::string from_u32(const std::u32string& s);

}  // namespace strata::jinja
