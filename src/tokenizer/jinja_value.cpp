#include "tokenizer/jinja_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace strata::jinja {

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set_int(int64_t key, Value value) {
  const std::string k = std::to_string(key);
  if (std::find(int_keys.begin(), int_keys.end(), k) == int_keys.end()) int_keys.push_back(k);
  set(k, std::move(value));
}

Value Dict::key(const std::string& k) const {
  if (!int_keys.empty() && std::find(int_keys.begin(), int_keys.end(), k) != int_keys.end())
    return Value(static_cast<int64_t>(std::stoll(k)));
  return Value(k);
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items)
    if (k == key) {
      v = std::move(value);
      return;
    }
  items.emplace_back(key, std::move(value));
}

Value Kwargs::take(const std::string& name) {
  for (auto it = items.begin(); it != items.end(); ++it)
    if (it->first == name) {
      Value v = std::move(it->second);
      items.erase(it);
      return v;
    }
  return Value();
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value::Value(bool b) : kind_(Kind::Bool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::Int), i_(i) {}
Value::Value(double d) : kind_(Kind::Float), d_(d) {}
Value::Value(std::string s)
    : kind_(Kind::String), s_(std::make_shared<const std::string>(std::move(s))) {}
Value::Value(List list) : kind_(Kind::List), list_(std::make_shared<List>(std::move(list))) {}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::generator(List items) {
  Value v(std::move(items));
  v.generator_ = true;
  return v;
}
Value::Value(Dict dict) : kind_(Kind::Dict), dict_(std::make_shared<Dict>(std::move(dict))) {}

Value Value::function(std::string name, Function f) {
  Value v;
  v.kind_ = Kind::Function;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  v.fn_ = std::make_shared<Function>(std::move(f));
  return v;
}

namespace {
template <typename J>
Value value_from_json(const J& j) {
  switch (j.type()) {
    case J::value_t::null:
      return Value::none();
    case J::value_t::boolean:
      return Value(j.template get<bool>());
    case J::value_t::number_integer:
    case J::value_t::number_unsigned:
      return Value(j.template get<int64_t>());
    case J::value_t::number_float:
      return Value(j.template get<double>());
    case J::value_t::string:
      return Value(j.template get<std::string>());
    case J::value_t::array: {
      List list;
      for (const auto& e : j) list.push_back(value_from_json(e));
      return Value(std::move(list));
    }
    case J::value_t::object: {
      Dict dict;
      for (auto it = j.begin(); it != j.end(); ++it)
        dict.items.emplace_back(it.key(), value_from_json(it.value()));
      return Value(std::move(dict));
    }
    default:
      fail("chat template input: unsupported JSON value {}", j.dump());
  }
}

}  // namespace

Value Value::from_json(const nlohmann::json& j) {
  return value_from_json(j);
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  return value_from_json(j);
}

bool Value::truthy() const {
  if (generator_) return true;  // a generator object, however many items it yields
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return b_;
    case Kind::Int:
      return i_ != 0;
    case Kind::Float:
      return d_ != 0;
    case Kind::String:
      return !s_->empty();
    case Kind::List:
      return !list_->empty();
    case Kind::Dict:
      return !dict_->items.empty();
    case Kind::Function:
      return true;
  }
  return false;
}

namespace {

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string python_quote(const std::string& s) {
  // Python prefers single quotes unless the string holds one and no double quote.
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = use_double ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c == q) {
          out += '\\';
          out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + q;
}

// A string as Python's json.dumps(ensure_ascii=False) writes it: nlohmann's escaping is the
// same (\" \\ \b \f \n \r \t, other control characters as lowercase \u00xx, UTF-8 as is).
std::string json_quote(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
// ensure_ascii=True: non-ASCII as \uXXXX (surrogate pairs beyond the BMP), as Python writes.
std::string json_quote_ascii(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string Value::str() const {
  // Python prints "<generator object ... at 0x...>", an address: no rendering could match it.
  if (generator_)
    fail("cannot print a generator (the result of map, select, selectattr, ...); add '| list'");
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return *s_;
    default:
      return repr();
  }
}

std::string Value::repr() const {
  if (generator_) return str();  // fails, as str() explains
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return b_ ? "True" : "False";
    case Kind::Int:
      return std::to_string(i_);
    case Kind::Float:
      return float_repr(d_);
    case Kind::String:
      return python_quote(*s_);
    case Kind::List: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      return out + "]";
    }
    case Kind::Dict: {
      std::string out = "{";
      for (size_t i = 0; i < dict_->items.size(); ++i)
        out += (i ? ", " : "") + dict_->key(dict_->items[i].first).repr() + ": " +
               dict_->items[i].second.repr();
      return out + "}";
    }
    case Kind::Function:
      return "<function " + *s_ + ">";
  }
  return "";
}

std::string Value::to_json(int indent, int depth) const {
  JsonStyle style;
  style.indent = indent;
  if (indent >= 0) style.item_sep = ",";
  return to_json(style, depth);
}

std::string Value::to_json(const JsonStyle& style, int depth) const {
  const int indent = style.indent;
  const std::string nl = indent >= 0 ? "\n" + std::string((depth + 1) * indent, ' ') : "";
  const std::string close = indent >= 0 ? "\n" + std::string(depth * indent, ' ') : "";
  const std::string& item_sep = style.item_sep;
  auto quote = [&](const std::string& s) {
    return style.ensure_ascii ? json_quote_ascii(s) : json_quote(s);
  };
  if (generator_)
    fail(
        "tojson: Object of type generator is not JSON serializable (the result of map, select, "
        "selectattr, ...; add '| list' before tojson)");
  switch (kind_) {
    case Kind::Undefined:
      fail("tojson: cannot serialize an undefined value");
    case Kind::None:
      return "null";
    case Kind::Bool:
      return b_ ? "true" : "false";
    case Kind::Int:
      return std::to_string(i_);
    case Kind::Float:
      if (std::isnan(d_)) return "NaN";
      if (std::isinf(d_)) return d_ > 0 ? "Infinity" : "-Infinity";
      return float_repr(d_);
    case Kind::String:
      return quote(*s_);
    case Kind::List: {
      if (list_->empty()) return "[]";
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i)
        out += (i ? item_sep : "") + nl + (*list_)[i].to_json(style, depth + 1);
      return out + close + "]";
    }
    case Kind::Dict: {
      if (dict_->items.empty()) return "{}";
      std::vector<size_t> order(dict_->items.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      if (style.sort_keys)
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
          return dict_->items[a].first < dict_->items[b].first;
        });
      std::string out = "{";
      for (size_t i = 0; i < order.size(); ++i)
        out += (i ? item_sep : "") + nl + quote(dict_->items[order[i]].first) + style.key_sep +
               dict_->items[order[i]].second.to_json(style, depth + 1);
      return out + close + "}";
    }
    case Kind::Function:
      fail("tojson: cannot serialize function {}", *s_);
  }
  return "";
}

std::string Value::type_name() const {
  if (generator_) return "generator";
  switch (kind_) {
    case Kind::Undefined:
      return "undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::Function:
      return "function";
  }
  return "";
}

bool Value::operator==(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::Int && o.kind_ == Kind::Int) return i_ == o.i_;
    return as_number() == o.as_number();
  }
  // Python: True == 1; keep bools and numbers comparable.
  if (kind_ == Kind::Bool && o.is_number()) return Value(static_cast<int64_t>(b_)) == o;
  if (o.kind_ == Kind::Bool && is_number()) return o == *this;
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::Bool:
      return b_ == o.b_;
    case Kind::String:
      return *s_ == *o.s_;
    case Kind::List:
      return *list_ == *o.list_;
    case Kind::Dict: {
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* other = o.dict_->find(k);
        if (!other || !(*other == v)) return false;
      }
      return true;
    }
    case Kind::Function:
      return fn_ == o.fn_;
    default:
      return false;
  }
}

int compare(const Value& a, const Value& b) {
  if ((a.is_number() || a.kind() == Value::Kind::Bool) &&
      (b.is_number() || b.kind() == Value::Kind::Bool)) {
    const double x = a.kind() == Value::Kind::Bool ? a.as_bool() : a.as_number();
    const double y = b.kind() == Value::Kind::Bool ? b.as_bool() : b.as_number();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string())
    return a.as_string().compare(b.as_string()) < 0 ? -1 : (a.as_string() == b.as_string() ? 0 : 1);
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (int c = compare(x[i], y[i])) return c;
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  fail("cannot compare {} with {}", a.type_name(), b.type_name());
}

std::u32string to_u32(const std::string& s) {
  std::u32string out;
  for (size_t pos = 0; pos < s.size();) {
    int len;
    out += tok::utf8_decode(s, pos, len);
    pos += len;
  }
  return out;
}

std::string from_u32(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) tok::utf8_append(out, c);
  return out;
}

}  // namespace strata::jinja
