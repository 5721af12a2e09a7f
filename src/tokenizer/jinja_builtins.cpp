// Jinja filters, tests and global functions (the ones published chat templates use).
#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>

#include "core/error.h"

namespace strata::jinja {

namespace {

Value arg_or(std::vector<Value>& args, Kwargs& kwargs, size_t i, const char* name, Value fallback) {
  if (i < args.size()) return args[i];
  Value v = kwargs.take(name);
  return v.is_undefined() ? fallback : v;
}

// `attribute` of map/selectattr/sort/join: "a.b" walks nested items; "0" indexes lists.
Value get_attribute(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = get_item(v, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// Jinja2's select_or_reject: a generator over the items, none at all for a falsy subject
// (None | selectattr(...) is empty, as `if value:` guards the loop there).
Value select_items(const Value& subject, std::vector<Value>& args, bool by_attribute, bool keep) {
  List out;
  size_t test_at = by_attribute ? 1 : 0;
  if (by_attribute && args.empty()) fail("selectattr/rejectattr need an attribute name");
  if (!subject.truthy()) return Value::generator({});
  for (const Value& item : iterate(subject)) {
    const Value v = by_attribute ? get_attribute(item, args[0].str()) : item;
    bool pass;
    if (args.size() <= test_at) {
      pass = v.truthy();
    } else {
      std::vector<Value> test_args(args.begin() + test_at + 1, args.end());
      pass = apply_test(args[test_at].str(), v, test_args);
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

}  // namespace

Value apply_filter(const std::string& name, const Value& subject, std::vector<Value>& args,
                   Kwargs& kwargs) {
  if (name == "length" || name == "count") return length_of(subject);
  if (name == "default" || name == "d") {
    const Value fallback = arg_or(args, kwargs, 0, "default_value", Value(""));
    const bool boolean = arg_or(args, kwargs, 1, "boolean", Value(false)).truthy();
    return subject.is_undefined() || (boolean && !subject.truthy()) ? fallback : subject;
  }
  // Jinja2's Undefined iterates as empty and has length 0, so the filters that iterate take
  // it (`tools | selectattr(...)` with no tools); the others fail loudly.
  // Its str() is "", so the string filters see "" (`param.description | trim`).
  static const std::set<std::string> kIterating = {"list",   "selectattr", "rejectattr", "select",
                                                   "reject", "map",        "join",       "length",
                                                   "count",  "unique",     "sort"};
  static const std::set<std::string> kStringy = {"trim",       "upper",   "lower",  "title",
                                                 "capitalize", "replace", "indent", "safe",
                                                 "e",          "escape",  "center", "wordcount"};
  if (subject.is_undefined() && name != "tojson" && name != "string" && !kIterating.count(name)) {
    if (!kStringy.count(name)) fail("filter '{}' applied to an undefined value", name);
    return apply_filter(name, Value(""), args, kwargs);
  }
  if (name == "trim")
    return python_strip(subject.str(), arg_or(args, kwargs, 0, "chars", Value()), true, true);
  if (name == "tojson") {
    // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    Value::JsonStyle style;
    const Value ensure_ascii = arg_or(args, kwargs, 0, "ensure_ascii", Value(false));
    const Value indent = arg_or(args, kwargs, 1, "indent", Value::none());
    const Value separators = arg_or(args, kwargs, 2, "separators", Value::none());
    const Value sort_keys = arg_or(args, kwargs, 3, "sort_keys", Value(false));
    style.ensure_ascii = ensure_ascii.truthy();
    if (!indent.is_none()) {
      if (indent.kind() != Value::Kind::Int) fail("tojson: indent must be an integer");
      style.indent = static_cast<int>(indent.as_int());
      style.item_sep = ",";
    }
    if (!separators.is_none()) {
      if (!separators.is_list() || separators.as_list().size() != 2 ||
          !separators.as_list()[0].is_string() || !separators.as_list()[1].is_string())
        fail("tojson: separators must be a pair of strings");
      style.item_sep = separators.as_list()[0].as_string();
      style.key_sep = separators.as_list()[1].as_string();
    }
    style.sort_keys = sort_keys.truthy();
    return subject.to_json(style);
  }
  if (name == "string") return subject.str();
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    Value result;
    std::vector<Value> none;
    call_method(Value(subject.str()), name, none, kwargs, result);
    return result;
  }
  if (name == "replace") {
    Value result;
    call_method(Value(subject.str()), "replace", args, kwargs, result);
    return result;
  }
  if (name == "safe") return Value::markup(subject.str());
  if (name == "escape" || name == "e")
    return subject.is_markup() ? subject : Value::markup(html_escape(subject.str()));
  if (name == "first" || name == "last") {
    const List items = iterate(subject);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return iterate(subject);
  if (name == "reverse") {
    if (subject.is_string()) {
      std::u32string u = to_u32(subject.as_string());
      std::reverse(u.begin(), u.end());
      return from_u32(u);
    }
    List items = iterate(subject);
    std::reverse(items.begin(), items.end());
    return items;
  }
  if (name == "join") {
    const std::string sep = arg_or(args, kwargs, 0, "d", Value("")).str();
    const Value attribute = arg_or(args, kwargs, 1, "attribute", Value());
    std::string out;
    const List items = iterate(subject);
    for (size_t i = 0; i < items.size(); ++i)
      out += (i ? sep : "") +
             (attribute.is_undefined() ? items[i] : get_attribute(items[i], attribute.str())).str();
    return out;
  }
  if (name == "map") {  // a generator, empty for a falsy subject (as select_items)
    const Value attribute = kwargs.take("attribute");
    List out;
    if (!subject.truthy()) return Value::generator({});
    for (const Value& item : iterate(subject)) {
      if (!attribute.is_undefined()) {
        Value v = get_attribute(item, attribute.str());
        if (v.is_undefined()) v = kwargs.items.empty() ? v : kwargs.items.front().second;
        out.push_back(v);
      } else {
        if (args.empty()) fail("map needs a filter name or attribute=");
        std::vector<Value> rest(args.begin() + 1, args.end());
        Kwargs none;
        out.push_back(apply_filter(args[0].str(), item, rest, none));
      }
    }
    return Value::generator(std::move(out));
  }
  if (name == "selectattr" || name == "rejectattr")
    return select_items(subject, args, true, name == "selectattr");
  if (name == "select" || name == "reject")
    return select_items(subject, args, false, name == "select");
  if (name == "items") {
    if (!subject.is_dict()) fail("items filter expects a dict, got {}", subject.type_name());
    List out;
    for (const auto& [k, v] : subject.as_dict().items)
      out.emplace_back(List{subject.as_dict().key(k), v});
    return out;
  }
  if (name == "dictsort") {
    Value items = apply_filter("items", subject, args, kwargs);
    std::stable_sort(
        items.as_list().begin(), items.as_list().end(),
        [](const Value& a, const Value& b) { return compare(a.as_list()[0], b.as_list()[0]) < 0; });
    return items;
  }
  if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    const Value attribute = kwargs.take("attribute");
    const bool reverse = kwargs.take("reverse").truthy();
    auto key = [&](const Value& v) {
      return attribute.is_undefined() ? v : get_attribute(v, attribute.str());
    };
    List items = iterate(subject);
    if (name == "unique") {
      List out;
      for (const Value& v : items)
        if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return key(o) == key(v); }))
          out.push_back(v);
      return Value::generator(std::move(out));
    }
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      return reverse ? compare(key(b), key(a)) < 0 : compare(key(a), key(b)) < 0;
    });
    if (name == "sort") return items;
    if (items.empty()) return Value();
    return name == "min" ? items.front() : items.back();
  }
  if (name == "sum") {
    Value total = arg_or(args, kwargs, 1, "start", Value(int64_t{0}));
    const Value attribute = arg_or(args, kwargs, 0, "attribute", Value());
    for (const Value& v0 : iterate(subject)) {
      const Value v = attribute.is_undefined() ? v0 : get_attribute(v0, attribute.str());
      if (!v.is_number() || !total.is_number())
        fail("sum filter needs numbers, got {}", v.type_name());
      if (v.kind() == Value::Kind::Int && total.kind() == Value::Kind::Int)
        total = total.as_int() + v.as_int();
      else
        total = total.as_number() + v.as_number();
    }
    return total;
  }
  if (name == "int") {
    if (subject.is_number()) return static_cast<int64_t>(subject.as_number());
    if (subject.kind() == Value::Kind::Bool) return static_cast<int64_t>(subject.as_bool());
    try {
      return static_cast<int64_t>(std::stoll(python_strip(subject.str(), Value(), true, true)));
    } catch (const std::exception&) {
      return arg_or(args, kwargs, 0, "default", Value(int64_t{0}));
    }
  }
  if (name == "float") {
    if (subject.is_number()) return subject.as_number();
    try {
      return std::stod(python_strip(subject.str(), Value(), true, true));
    } catch (const std::exception&) {
      return arg_or(args, kwargs, 0, "default", Value(0.0));
    }
  }
  if (name == "abs") {
    if (subject.kind() == Value::Kind::Int)
      return static_cast<int64_t>(std::llabs(subject.as_int()));
    if (subject.is_number()) return std::fabs(subject.as_number());
    fail("abs filter needs a number, got {}", subject.type_name());
  }
  if (name == "round") {
    const int64_t precision = arg_or(args, kwargs, 0, "precision", Value(int64_t{0})).as_int();
    const double scale = std::pow(10.0, static_cast<double>(precision));
    return std::round(subject.as_number() * scale) / scale;
  }
  if (name == "indent") {
    const Value width = arg_or(args, kwargs, 0, "width", Value(int64_t{4}));
    const bool first = arg_or(args, kwargs, 1, "first", Value(false)).truthy();
    const bool blank = arg_or(args, kwargs, 2, "blank", Value(false)).truthy();
    const std::string pad =
        width.is_string() ? width.as_string() : std::string(width.as_int(), ' ');
    const List lines = python_split(subject.str(), Value("\n"), -1);
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i].as_string();
      if (i > 0) out += "\n";
      if ((i > 0 || first) && (blank || !line.empty())) out += pad;
      out += line;
    }
    return out;
  }
  if (name == "wordcount")
    return static_cast<int64_t>(python_split(subject.str(), Value(), -1).size());
  if (name == "attr") return get_item(subject, args.empty() ? Value() : args[0]);
  fail("unsupported filter '{}'", name);
}

bool apply_test(const std::string& name, const Value& v, std::vector<Value>& args) {
  const Value a = args.empty() ? Value() : args[0];
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == Value::Kind::Bool;
  if (name == "true") return v.kind() == Value::Kind::Bool && v.as_bool();
  if (name == "false") return v.kind() == Value::Kind::Bool && !v.as_bool();
  if (name == "integer") return v.kind() == Value::Kind::Int;
  if (name == "float") return v.kind() == Value::Kind::Float;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.kind() == Value::Kind::Function;
  if (name == "odd" || name == "even") {
    if (v.kind() != Value::Kind::Int)
      fail("test '{}' needs an integer, got {}", name, v.type_name());
    return (((v.as_int() % 2) + 2) % 2 == 1) == (name == "odd");
  }
  if (name == "divisibleby") return a.as_int() != 0 && v.as_int() % a.as_int() == 0;
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return v == a;
  if (name == "ne" || name == "!=") return !(v == a);
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, a) < 0;
  if (name == "le" || name == "<=") return compare(v, a) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, a) > 0;
  if (name == "ge" || name == ">=") return compare(v, a) >= 0;
  if (name == "in") {
    for (const Value& item : iterate(a))
      if (item == v) return true;
    return a.is_string() && v.is_string() && a.as_string().find(v.as_string()) != std::string::npos;
  }
  if (name == "lower" || name == "upper") {
    const std::string s = v.str();
    return std::none_of(s.begin(), s.end(), [&](char c) {
      return name == "lower" ? std::isupper(static_cast<unsigned char>(c))
                             : std::islower(static_cast<unsigned char>(c));
    });
  }
  fail("unsupported test '{}'", name);
}

void add_global_functions(Dict& globals) {
  globals.set("range", Value::function("range", [](std::vector<Value>& args, Kwargs&) -> Value {
                if (args.empty() || args.size() > 3) fail("range() takes 1 to 3 integer arguments");
                for (const Value& a : args)
                  if (a.kind() != Value::Kind::Int)
                    fail("range() arguments must be integers, got {}", a.type_name());
                const int64_t start = args.size() > 1 ? args[0].as_int() : 0;
                const int64_t stop = args.size() > 1 ? args[1].as_int() : args[0].as_int();
                const int64_t step = args.size() > 2 ? args[2].as_int() : 1;
                if (step == 0) fail("range() step must not be zero");
                List out;
                for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                  if (out.size() > 1000000) fail("range() larger than a million items");
                  out.emplace_back(i);
                }
                return out;
              }));
  auto make_dict = [](bool is_namespace) {
    return [is_namespace](std::vector<Value>& args, Kwargs& kwargs) -> Value {
      Dict d;
      d.is_namespace = is_namespace;
      for (const Value& a : args) {
        if (!a.is_dict())
          fail("{}() positional argument must be a dict", is_namespace ? "namespace" : "dict");
        for (const auto& [k, v] : a.as_dict().items) d.set(k, v);
      }
      for (auto& [k, v] : kwargs.items) d.set(k, v);
      kwargs.items.clear();
      return Value(std::move(d));
    };
  };
  globals.set("namespace", Value::function("namespace", make_dict(true)));
  globals.set("dict", Value::function("dict", make_dict(false)));
  globals.set("raise_exception",
              Value::function("raise_exception", [](std::vector<Value>& args, Kwargs&) -> Value {
                fail("the template raised an exception: {}", args.empty() ? "" : args[0].str());
              }));
  globals.set("strftime_now", strftime_now_function([] {
                const std::time_t now = std::time(nullptr);
                std::tm local{};
                localtime_r(&now, &local);
                return local;
              }));
}

Value strftime_now_function(std::function<std::tm()> clock) {
  return Value::function(
      "strftime_now", [clock = std::move(clock)](std::vector<Value>& args, Kwargs&) -> Value {
        if (args.empty() || !args[0].is_string()) fail("strftime_now() needs a format string");
        const std::tm now = clock();
        char buffer[256];
        const size_t n = std::strftime(buffer, sizeof(buffer), args[0].as_string().c_str(), &now);
        return std::string(buffer, n);
      });
}

}  // namespace strata::jinja
