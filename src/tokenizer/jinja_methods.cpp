// Python methods of str, list and dict that chat templates call, and the item access and
// iteration rules shared by the evaluator and the filters.
#include <algorithm>
#include <set>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/unicode.h"

namespace strata::jinja {

namespace {

int64_t arg_int(const std::vector<Value>& args, size_t i, int64_t fallback) {
  if (i >= args.size() || args[i].is_none() || args[i].is_undefined()) return fallback;
  if (args[i].kind() != Value::Kind::Int)
    fail("expected an integer argument, got {}", args[i].type_name());
  return args[i].as_int();
}

const std::string& arg_str(const std::vector<Value>& args, size_t i, const char* method) {
  if (i >= args.size() || !args[i].is_string())
    fail("{}() expects a string argument{}", method,
         i < args.size() ? ", got " + args[i].type_name() : "");
  return args[i].as_string();
}

Value arg(std::vector<Value>& args, Kwargs& kwargs, size_t i, const char* name) {
  if (i < args.size()) return args[i];
  return kwargs.take(name);
}

// startswith/endswith accept a string or a tuple of strings.
bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0
                  : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_string()) return one(affix.as_string());
  if (affix.is_list()) {
    for (const Value& a : affix.as_list())
      if (a.is_string() && one(a.as_string())) return true;
    return false;
  }
  fail("startswith/endswith expects a string or a tuple of strings, got {}", affix.type_name());
}

std::string title_case(const std::string& s) {
  std::u32string u = to_u32(s);
  bool start = true;
  for (char32_t& c : u) {
    const bool alpha = (c < 128 && std::isalpha(static_cast<int>(c))) || c >= 128;
    if (alpha) {
      if (c < 128)
        c = start ? std::toupper(static_cast<int>(c)) : std::tolower(static_cast<int>(c));
      start = false;
    } else {
      start = true;
    }
  }
  return from_u32(u);
}

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s)
    c = upper ? std::toupper(static_cast<unsigned char>(c))
              : std::tolower(static_cast<unsigned char>(c));
  return s;
}

}  // namespace

std::string python_strip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::u32string u = to_u32(s);
  const bool whitespace = chars.is_undefined() || chars.is_none();
  if (!whitespace && !chars.is_string())
    fail("strip() expects a string of characters, got {}", chars.type_name());
  const std::u32string set = whitespace ? U"" : to_u32(chars.as_string());
  auto strip_it = [&](char32_t c) {
    return whitespace ? tok::is_unicode_whitespace(c) || (c >= 0x1C && c <= 0x1F)
                      : set.find(c) != std::u32string::npos;
  };
  size_t b = 0, e = u.size();
  while (left && b < e && strip_it(u[b])) ++b;
  while (right && e > b && strip_it(u[e - 1])) --e;
  return from_u32(u.substr(b, e - b));
}

List python_split(const std::string& s, const Value& sep, int64_t maxsplit) {
  List out;
  if (sep.is_undefined() || sep.is_none()) {
    const std::u32string u = to_u32(s);
    size_t i = 0;
    while (i < u.size()) {
      while (i < u.size() && tok::is_unicode_whitespace(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = u.size();
        while (e > i && tok::is_unicode_whitespace(u[e - 1])) --e;
        out.emplace_back(from_u32(u.substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < u.size() && !tok::is_unicode_whitespace(u[j])) ++j;
      out.emplace_back(from_u32(u.substr(i, j - i)));
      i = j;
    }
    return out;
  }
  if (!sep.is_string()) fail("split() separator must be a string, got {}", sep.type_name());
  const std::string& d = sep.as_string();
  if (d.empty()) fail("split() separator must not be empty");
  size_t start = 0;
  for (size_t p = s.find(d); p != std::string::npos; p = s.find(d, start)) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    out.emplace_back(s.substr(start, p - start));
    start = p + d.size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

int64_t length_of(const Value& v) {
  if (v.is_generator())
    fail("object of type 'generator' has no len() (the result of map, select, ...; add '| list')");
  switch (v.kind()) {
    case Value::Kind::String:
      return static_cast<int64_t>(to_u32(v.as_string()).size());
    case Value::Kind::List:
      return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::Dict:
      return static_cast<int64_t>(v.as_dict().items.size());
    case Value::Kind::Undefined:
      return 0;
    default:
      fail("object of type {} has no length", v.type_name());
  }
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::List:
      return v.as_list();
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::Dict: {
      List keys;
      for (const auto& [k, value] : v.as_dict().items) keys.push_back(v.as_dict().key(k));
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (char32_t c : to_u32(v.as_string())) chars.emplace_back(from_u32(std::u32string(1, c)));
      return chars;
    }
    default:
      fail("object of type {} is not iterable", v.type_name());
  }
}

Value get_item(const Value& object, const Value& key) {
  switch (object.kind()) {
    case Value::Kind::Dict: {
      if (!key.is_string() && key.kind() != Value::Kind::Int) return Value();
      const Value* v =
          object.as_dict().find(key.is_string() ? key.as_string() : std::to_string(key.as_int()));
      return v ? *v : Value();
    }
    case Value::Kind::List:
    case Value::Kind::String: {
      if (key.kind() != Value::Kind::Int) return Value();
      if (object.is_list()) {
        const List& list = object.as_list();
        int64_t i = key.as_int();
        if (i < 0) i += static_cast<int64_t>(list.size());
        if (i < 0 || i >= static_cast<int64_t>(list.size())) return Value();
        return list[i];
      }
      const std::u32string u = to_u32(object.as_string());
      int64_t i = key.as_int();
      if (i < 0) i += static_cast<int64_t>(u.size());
      if (i < 0 || i >= static_cast<int64_t>(u.size())) return Value();
      return Value(from_u32(std::u32string(1, u[i])));
    }
    case Value::Kind::Undefined:
      fail("cannot read '{}' of an undefined value", key.str());
    case Value::Kind::None:
      fail("cannot read '{}' of None", key.str());
    default:
      return Value();
  }
}

namespace {

// Python's str.format for replacement fields without a format spec or conversion: "{}" (the
// next positional argument), "{0}", "{name}", and "{{" / "}}" for braces (what templates write:
// '<tool_call{}>'.format(suffix)). A spec or conversion ("{:>8}", "{!r}") is an Error.
std::string python_format(const std::string& s, const std::vector<Value>& args,
                          const Kwargs& kwargs) {
  std::string out;
  size_t next = 0;
  bool automatic = false, manual = false;  // Python refuses to mix "{}" with "{0}"
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if ((c == '{' || c == '}') && i + 1 < s.size() && s[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') fail("str.format(): single '}}' encountered in the format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = s.find('}', i);
    if (close == std::string::npos)
      fail("str.format(): single '{{' encountered in the format string");
    const std::string field = s.substr(i + 1, close - i - 1);
    i = close;
    if (field.find_first_of(":!.[") != std::string::npos)
      fail(
          "str.format(): the field '{{{}}}' has a format spec or conversion, which strata does not "
          "support; write the value with '~' or the format filter",
          field);
    const bool numbered = !field.empty() && std::all_of(field.begin(), field.end(), [](char d) {
      return d >= '0' && d <= '9';
    });
    (field.empty() ? automatic : manual) |= field.empty() || numbered;
    if (automatic && manual)
      fail(
          "str.format(): cannot switch between automatic field numbering ({{}}) and manual "
          "field specification ({{0}})");
    if (field.empty()) {
      if (next >= args.size()) fail("str.format(): Replacement index {} out of range", next);
      out += args[next++].str();
    } else if (numbered) {
      const size_t k = std::stoul(field);
      if (k >= args.size()) fail("str.format(): Replacement index {} out of range", k);
      out += args[k].str();
    } else {
      auto it = std::find_if(kwargs.items.begin(), kwargs.items.end(),
                             [&](const auto& kv) { return kv.first == field; });
      if (it == kwargs.items.end()) fail("str.format(): KeyError: '{}'", field);
      out += it->second.str();
    }
  }
  return out;
}

// transformers renders in Jinja2's ImmutableSandboxedEnvironment, which refuses the methods
// that modify a list or a dict (its modifies_known_mutable): a template calling one fails
// there, so it fails here too.
bool modifies_in_place(const Value& object, const std::string& name) {
  static const std::set<std::string> kListMutators = {"append", "extend",  "insert", "pop",
                                                      "remove", "reverse", "sort",   "clear"};
  static const std::set<std::string> kDictMutators = {"update", "pop", "popitem", "setdefault",
                                                      "clear"};
  return (object.is_list() && kListMutators.count(name)) ||
         (object.is_dict() && !object.as_dict().is_namespace && kDictMutators.count(name));
}

}  // namespace

bool is_method_name(const Value& object, const std::string& name) {
  if (modifies_in_place(object, name)) return true;  // call_method() refuses it
  static const std::vector<std::string> kStr = {
      "startswith", "endswith", "split",      "rsplit",  "strip",   "lstrip", "rstrip", "upper",
      "lower",      "title",    "capitalize", "replace", "find",    "rfind",  "count",  "join",
      "splitlines", "isdigit",  "isspace",    "isalpha", "isalnum", "format"};
  static const std::vector<std::string> kList = {"index", "count"};
  static const std::vector<std::string> kDict = {"items", "keys", "values", "get"};
  const auto& names = object.is_string() ? kStr
                      : object.is_list() ? kList
                      : object.is_dict() ? kDict
                                         : kList;
  if (!object.is_string() && !object.is_list() && !object.is_dict()) return false;
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool call_method(const Value& object, const std::string& name, std::vector<Value>& args,
                 Kwargs& kwargs, Value& result) {
  if (modifies_in_place(object, name))
    fail(
        "access to attribute '{}' of '{}' object is unsafe: transformers' sandboxed Jinja "
        "refuses methods that modify a list or dict (build a new one with '+', or keep state in "
        "a namespace())",
        name, object.type_name());
  if (!is_method_name(object, name)) return false;
  if (object.is_string()) {
    const std::string& s = object.as_string();
    if (name == "startswith" || name == "endswith")
      result = affix_match(s, arg(args, kwargs, 0, "prefix"), name == "startswith");
    else if (name == "split")
      result = python_split(s, arg(args, kwargs, 0, "sep"), arg_int(args, 1, -1));
    else if (name == "rsplit") {
      if (arg_int(args, 1, -1) >= 0) fail("rsplit() with maxsplit is not supported");
      result = python_split(s, arg(args, kwargs, 0, "sep"), -1);
    } else if (name == "strip" || name == "lstrip" || name == "rstrip")
      result = python_strip(s, arg(args, kwargs, 0, "chars"), name != "rstrip", name != "lstrip");
    else if (name == "upper" || name == "lower")
      result = ascii_case(s, name == "upper");
    else if (name == "title")
      result = title_case(s);
    else if (name == "capitalize")
      result = s.empty() ? s : ascii_case(s.substr(0, 1), true) + ascii_case(s.substr(1), false);
    else if (name == "replace") {
      const std::string& from = arg_str(args, 0, "replace");
      const std::string& to = arg_str(args, 1, "replace");
      int64_t count = arg_int(args, 2, -1);
      std::string out;
      size_t start = 0;
      if (from.empty()) fail("replace() with an empty pattern is not supported");
      for (size_t p = s.find(from); p != std::string::npos && count != 0;
           p = s.find(from, start), --count) {
        out += s.substr(start, p - start) + to;
        start = p + from.size();
      }
      result = out + s.substr(start);
    } else if (name == "find" || name == "rfind") {
      const std::string& needle = arg_str(args, 0, name.c_str());
      const size_t p = name == "find" ? s.find(needle) : s.rfind(needle);
      result = p == std::string::npos ? int64_t{-1}
                                      : static_cast<int64_t>(to_u32(s.substr(0, p)).size());
    } else if (name == "count") {
      const std::string& needle = arg_str(args, 0, "count");
      int64_t n = 0;
      if (needle.empty())
        n = length_of(object) + 1;
      else
        for (size_t p = s.find(needle); p != std::string::npos;
             p = s.find(needle, p + needle.size()))
          ++n;
      result = n;
    } else if (name == "join") {
      std::string out;
      const List items = iterate(args.empty() ? Value() : args[0]);
      for (size_t i = 0; i < items.size(); ++i) out += (i ? s : "") + items[i].str();
      result = out;
    } else if (name == "splitlines") {
      List lines = python_split(s, Value("\n"), -1);
      if (!lines.empty() && lines.back().as_string().empty()) lines.pop_back();
      result = std::move(lines);
    } else if (name == "format") {
      result = python_format(s, args, kwargs);
      kwargs.items.clear();
    } else {
      bool all = !s.empty();
      for (char32_t c : to_u32(s)) {
        if (name == "isdigit")
          all = all && c < 128 && std::isdigit(static_cast<int>(c));
        else if (name == "isspace")
          all = all && tok::is_unicode_whitespace(c);
        else if (name == "isalpha")
          all = all && c < 128 && std::isalpha(static_cast<int>(c));
        else
          all = all && c < 128 && std::isalnum(static_cast<int>(c));
      }
      result = all;
    }
    return true;
  }
  if (object.is_list()) {
    List& list = object.as_list();
    if (name == "index") {
      auto it = std::find(list.begin(), list.end(), args.empty() ? Value() : args[0]);
      if (it == list.end()) fail("index(): value is not in the list");
      result = static_cast<int64_t>(it - list.begin());
    } else {
      result = static_cast<int64_t>(
          std::count(list.begin(), list.end(), args.empty() ? Value() : args[0]));
    }
    return true;
  }
  Dict& dict = object.as_dict();
  if (name == "items" || name == "keys" || name == "values") {
    List out;
    for (const auto& [k, v] : dict.items) {
      if (name == "items")
        out.emplace_back(List{dict.key(k), v});
      else
        out.push_back(name == "keys" ? dict.key(k) : v);
    }
    result = std::move(out);
  } else if (name == "get") {
    const Value key = args.empty() ? Value() : args[0];
    const Value* v = key.is_string()                  ? dict.find(key.as_string())
                     : key.kind() == Value::Kind::Int ? dict.find(std::to_string(key.as_int()))
                                                      : nullptr;
    result = v ? *v : (args.size() > 1 ? args[1] : Value::none());
  }
  return true;
}

}  // namespace strata::jinja
