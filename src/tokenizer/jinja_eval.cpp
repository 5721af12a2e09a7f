// Jinja evaluation: statements write to the output, expressions produce Values. Scopes are
// a stack: the template's top level, then one per for-loop iteration and macro call, so
// `set` inside a loop stays in the loop (use a namespace to carry state out), as in Jinja2.
#include <cmath>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/jinja.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_builtins.h"

namespace strata::jinja {

namespace {

// An error that already names its template position.
class PositionedError : public Error {
 public:
  using Error::Error;
};

struct BreakLoop {};
struct ContinueLoop {};

class Evaluator {
 public:
  Evaluator(const std::string& source, const Dict& variables) : source_(source) {
    scopes_.emplace_back();
    Dict globals;
    add_global_functions(globals);
    for (const auto& [k, v] : variables.items) globals.set(k, v);
    for (auto& [k, v] : globals.items) scopes_[0][k] = v;
  }

  void exec(const Body& body, std::string& out) {
    for (const NodePtr& node : body) exec(*node, out);
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  [[noreturn]] void error_at(size_t pos, const std::string& message) const {
    try {
      syntax_error(source_, pos, message);
    } catch (const Error& e) {
      throw PositionedError(e.what());
    }
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return Value();
  }

  void exec(const Node& node, std::string& out) {
    try {
      exec_node(node, out);
    } catch (const PositionedError&) {
      throw;
    } catch (const BreakLoop&) {
      throw;
    } catch (const ContinueLoop&) {
      throw;
    } catch (const Error& e) {
      error_at(node.pos, e.what());
    }
  }

  void exec_node(const Node& node, std::string& out) {
    switch (node.kind) {
      case Node::Kind::Text:
        out += node.text;
        return;
      case Node::Kind::Output:
        out += eval(*node.expr).str();
        return;
      case Node::Kind::If:
        for (const auto& [condition, body] : node.branches) {
          if (!condition || eval(*condition).truthy()) {
            exec(body, out);
            return;
          }
        }
        return;
      case Node::Kind::For:
        exec_for(node, out);
        return;
      case Node::Kind::Set:
        exec_set(node);
        return;
      case Node::Kind::FilterBlock: {
        std::string captured;
        exec(node.body, captured);
        auto& scope = scopes_.back();
        scope[kFilterBlockBody] = Value(std::move(captured));
        out += eval(*node.expr).str();
        scope.erase(kFilterBlockBody);
        return;
      }
      case Node::Kind::SetBlock: {
        std::string captured;
        exec(node.body, captured);
        scopes_.back()[node.targets[0]] = Value(std::move(captured));
        return;
      }
      case Node::Kind::Generation:
        scopes_.emplace_back();
        try {
          exec(node.body, out);
        } catch (...) {
          scopes_.pop_back();
          throw;
        }
        scopes_.pop_back();
        return;
      case Node::Kind::Macro:
        define_macro(node);
        return;
      case Node::Kind::Break:
        throw BreakLoop{};
      case Node::Kind::Continue:
        throw ContinueLoop{};
    }
  }

  void assign(const std::vector<std::string>& targets, const Value& value, size_t pos) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = value;
      return;
    }
    const List items = iterate(value);
    if (items.size() != targets.size())
      error_at(pos,
               fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()));
    for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = items[i];
  }

  void exec_set(const Node& node) {
    Value value = eval(*node.expr);
    if (node.text.empty()) {
      assign(node.targets, value, node.pos);
      return;
    }
    const Value ns = lookup(node.targets[0]);
    if (!ns.is_dict() || !ns.as_dict().is_namespace)
      error_at(node.pos, "'{% set " + node.targets[0] + "." + node.text + " %}' needs '" +
                             node.targets[0] + "' to be a namespace()");
    ns.as_dict().set(node.text, std::move(value));
  }

  void exec_for(const Node& node, std::string& out) {
    List items;
    for (Value& item : iterate(eval(*node.expr))) {
      if (node.condition) {
        scopes_.emplace_back();
        assign(node.targets, item, node.pos);
        const bool keep = eval(*node.condition).truthy();
        scopes_.pop_back();
        if (!keep) continue;
      }
      items.push_back(std::move(item));
    }
    if (items.empty()) {
      exec(node.else_body, out);
      return;
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      Dict loop;
      loop.set("index", i + 1);
      loop.set("index0", i);
      loop.set("revindex", n - i);
      loop.set("revindex0", n - i - 1);
      loop.set("first", i == 0);
      loop.set("last", i == n - 1);
      loop.set("length", n);
      loop.set("previtem", i > 0 ? items[i - 1] : Value());
      loop.set("nextitem", i + 1 < n ? items[i + 1] : Value());
      loop.set("cycle",
               Value::function("loop.cycle", [i](std::vector<Value>& args, Kwargs&) -> Value {
                 if (args.empty()) fail("loop.cycle() needs at least one value");
                 return args[i % args.size()];
               }));
      scopes_.emplace_back();
      scopes_.back()["loop"] = Value(std::move(loop));
      assign(node.targets, items[i], node.pos);
      bool stop = false;
      try {
        exec(node.body, out);
      } catch (const BreakLoop&) {
        stop = true;
      } catch (const ContinueLoop&) {
      }
      scopes_.pop_back();
      if (stop) break;
    }
  }

  void define_macro(const Node& node) {
    const Node* macro = &node;
    scopes_.back()[node.targets[0]] = Value::function(
        node.targets[0], [this, macro](std::vector<Value>& args, Kwargs& kwargs) -> Value {
          if (args.size() > macro->params.size())
            fail("macro '{}' takes {} arguments, got {}", macro->targets[0], macro->params.size(),
                 args.size());
          Scope scope;
          for (size_t i = 0; i < macro->params.size(); ++i) {
            const auto& [name, default_value] = macro->params[i];
            Value v = i < args.size() ? args[i] : kwargs.take(name);
            if (v.is_undefined() && default_value) v = eval(*default_value);
            scope[name] = v;
          }
          if (!kwargs.items.empty())
            fail("macro '{}' has no parameter '{}'", macro->targets[0], kwargs.items[0].first);
          // A macro sees the template's top level and its own parameters, not the caller's locals.
          std::vector<Scope> saved(scopes_.begin() + 1, scopes_.end());
          scopes_.resize(1);
          scopes_.push_back(std::move(scope));
          std::string out;
          try {
            exec(macro->body, out);
          } catch (...) {
            scopes_.resize(1);
            scopes_.insert(scopes_.end(), saved.begin(), saved.end());
            throw;
          }
          scopes_.resize(1);
          scopes_.insert(scopes_.end(), saved.begin(), saved.end());
          return Value(std::move(out));
        });
  }

  // ---- expressions ----

  Value eval(const Expr& e) {
    try {
      return eval_expr(e);
    } catch (const PositionedError&) {
      throw;
    } catch (const Error& err) {
      error_at(e.pos, err.what());
    }
  }

  void eval_args(const Expr& e, size_t first, std::vector<Value>& args, Kwargs& kwargs) {
    for (size_t i = first; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
    for (const auto& [k, v] : e.kwargs) kwargs.items.emplace_back(k, eval(*v));
  }

  Value eval_expr(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.value;
      case Expr::Kind::Name:
        return lookup(e.name);
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        List items;
        for (const ExprPtr& c : e.children) items.push_back(eval(*c));
        return items;
      }
      case Expr::Kind::Dict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          const Value key = eval(*e.children[i]);
          if (key.kind() == Value::Kind::Int) {  // Python's {1: ...} (tojson writes "1")
            d.set_int(key.as_int(), eval(*e.children[i + 1]));
            continue;
          }
          if (!key.is_string())
            fail("dict keys must be strings or integers, got {}", key.type_name());
          d.set(key.as_string(), eval(*e.children[i + 1]));
        }
        return Value(std::move(d));
      }
      case Expr::Kind::Attr: {
        const Value object = eval(*e.children[0]);
        if (object.is_undefined())
          fail("'{}' is undefined (reading .{})", describe(*e.children[0]), e.name);
        return get_item(object, Value(e.name));
      }
      case Expr::Kind::Index: {
        const Value object = eval(*e.children[0]);
        if (object.is_undefined())
          fail("'{}' is undefined (indexing it)", describe(*e.children[0]));
        return get_item(object, eval(*e.children[1]));
      }
      case Expr::Kind::Slice:
        return eval_slice(e);
      case Expr::Kind::Call:
        return eval_call(e);
      case Expr::Kind::Filter: {
        const Value subject = eval(*e.children[0]);
        std::vector<Value> args;
        Kwargs kwargs;
        eval_args(e, 1, args, kwargs);
        return apply_filter(e.name, subject, args, kwargs);
      }
      case Expr::Kind::Test: {
        const Value subject = eval(*e.children[0]);
        std::vector<Value> args;
        Kwargs kwargs;
        eval_args(e, 1, args, kwargs);
        return apply_test(e.name, subject, args) != e.negated;
      }
      case Expr::Kind::Unary: {
        const Value v = eval(*e.children[0]);
        if (e.name == "not") return !v.truthy();
        if (v.kind() == Value::Kind::Int) return e.name == "-" ? -v.as_int() : v.as_int();
        if (v.kind() == Value::Kind::Float) return e.name == "-" ? -v.as_number() : v.as_number();
        fail("unary '{}' needs a number, got {}", e.name, v.type_name());
      }
      case Expr::Kind::Binary:
        return eval_binary(e);
      case Expr::Kind::Condition:
        if (eval(*e.children[0]).truthy()) return eval(*e.children[1]);
        return e.children[2] ? eval(*e.children[2]) : Value();
    }
    return Value();
  }

  static std::string describe(const Expr& e) {
    if (e.kind == Expr::Kind::Name) return e.name;
    if (e.kind == Expr::Kind::Attr) return describe(*e.children[0]) + "." + e.name;
    return "value";
  }

  Value eval_call(const Expr& e) {
    const Expr& callee = *e.children[0];
    std::vector<Value> args;
    Kwargs kwargs;
    if (callee.kind == Expr::Kind::Attr) {
      const Value object = eval(*callee.children[0]);
      if (object.is_undefined())
        fail("'{}' is undefined (calling .{}())", describe(*callee.children[0]), callee.name);
      if (is_method_name(object, callee.name)) {
        eval_args(e, 1, args, kwargs);
        Value result;
        call_method(object, callee.name, args, kwargs, result);
        return result;
      }
    }
    const Value fn = eval(callee);
    if (fn.kind() != Value::Kind::Function) {
      if (fn.is_undefined()) fail("'{}' is undefined and cannot be called", describe(callee));
      fail("'{}' ({}) is not callable", describe(callee), fn.type_name());
    }
    eval_args(e, 1, args, kwargs);
    return fn.as_function()(args, kwargs);
  }

  Value eval_slice(const Expr& e) {
    const Value object = eval(*e.children[0]);
    auto bound = [&](int i) -> std::optional<int64_t> {
      if (!e.children[i]) return std::nullopt;
      const Value v = eval(*e.children[i]);
      if (v.is_none()) return std::nullopt;
      if (v.kind() != Value::Kind::Int)
        fail("slice bounds must be integers, got {}", v.type_name());
      return v.as_int();
    };
    const auto start = bound(1), stop = bound(2), step_opt = bound(3);
    const int64_t step = step_opt.value_or(1);
    if (step == 0) fail("slice step cannot be zero");
    auto pick = [&](int64_t n, auto&& take) {
      // Python's slice.indices().
      auto clamp = [&](std::optional<int64_t> v, int64_t def) {
        if (!v) return def;
        int64_t x = *v < 0 ? *v + n : *v;
        if (step > 0) return std::clamp<int64_t>(x, 0, n);
        return std::clamp<int64_t>(x, -1, n - 1);
      };
      const int64_t b = clamp(start, step > 0 ? 0 : n - 1), end = clamp(stop, step > 0 ? n : -1);
      for (int64_t i = b; step > 0 ? i < end : i > end; i += step) take(i);
    };
    if (object.is_string()) {
      const std::u32string u = to_u32(object.as_string());
      std::u32string out;
      pick(static_cast<int64_t>(u.size()), [&](int64_t i) { out += u[i]; });
      return from_u32(out);
    }
    if (object.is_list()) {
      const List& list = object.as_list();
      List out;
      pick(static_cast<int64_t>(list.size()), [&](int64_t i) { out.push_back(list[i]); });
      return out;
    }
    fail("cannot slice {}", object.type_name());
  }

  Value eval_binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value left = eval(*e.children[0]);
      return left.truthy() ? eval(*e.children[1]) : left;
    }
    if (op == "or") {
      Value left = eval(*e.children[0]);
      return left.truthy() ? left : eval(*e.children[1]);
    }
    const Value a = eval(*e.children[0]);
    const Value b = eval(*e.children[1]);
    if (op == "==") return a == b;
    if (op == "!=") return !(a == b);
    if (op == "<") return compare(a, b) < 0;
    if (op == ">") return compare(a, b) > 0;
    if (op == "<=") return compare(a, b) <= 0;
    if (op == ">=") return compare(a, b) >= 0;
    if (op == "in" || op == "not in") {
      std::vector<Value> args{b};
      return apply_test("in", a, args) == (op == "in");
    }
    if (op == "~") return a.str() + b.str();
    if (a.is_undefined() || b.is_undefined())
      fail("'{}' is undefined (used with '{}')", describe(*e.children[a.is_undefined() ? 0 : 1]),
           op);
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        if (!a.is_markup() && !b.is_markup()) return a.as_string() + b.as_string();
        auto escaped = [](const Value& v) {
          return v.is_markup() ? v.as_string() : html_escape(v.as_string());
        };
        return Value::markup(escaped(a) + escaped(b));
      }
      if (a.is_list() && b.is_list()) {
        List out = a.as_list();
        out.insert(out.end(), b.as_list().begin(), b.as_list().end());
        return out;
      }
    }
    if (op == "*" && (a.is_string() || b.is_string()) &&
        (a.kind() == Value::Kind::Int || b.kind() == Value::Kind::Int)) {
      const std::string& s = a.is_string() ? a.as_string() : b.as_string();
      std::string out;
      for (int64_t i = 0, n = a.is_string() ? b.as_int() : a.as_int(); i < n; ++i) out += s;
      return out;
    }
    if (!a.is_number() || !b.is_number())
      fail("unsupported operand types for {}: {} and {}", op, a.type_name(), b.type_name());
    const bool ints = a.kind() == Value::Kind::Int && b.kind() == Value::Kind::Int;
    const double x = a.as_number(), y = b.as_number();
    if (op == "+") return ints ? Value(a.as_int() + b.as_int()) : Value(x + y);
    if (op == "-") return ints ? Value(a.as_int() - b.as_int()) : Value(x - y);
    if (op == "*") return ints ? Value(a.as_int() * b.as_int()) : Value(x * y);
    if (op == "/") {
      if (y == 0) fail("division by zero");
      return x / y;
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail("division by zero");
      if (ints) {
        const int64_t p = a.as_int(), q = b.as_int();
        int64_t d = p / q;
        if ((p % q != 0) && ((p < 0) != (q < 0))) --d;
        return op == "//" ? Value(d) : Value(p - d * q);
      }
      const double d = std::floor(x / y);
      return op == "//" ? Value(d) : Value(x - d * y);
    }
    if (op == "**") {
      if (ints && b.as_int() >= 0) {
        int64_t r = 1;
        for (int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
        return r;
      }
      return std::pow(x, y);
    }
    fail("unsupported operator '{}'", op);
  }

  const std::string& source_;
  std::vector<Scope> scopes_;
};

}  // namespace

Template::Template(std::string source) {
  // Jinja normalizes newlines and, by default, drops one trailing newline of the template.
  for (size_t p = source.find("\r\n"); p != std::string::npos; p = source.find("\r\n", p))
    source.erase(p, 1);
  if (!source.empty() && source.back() == '\n') source.pop_back();
  source_ = std::move(source);
  body_ = std::make_shared<const Body>(parse_template(source_, lex_template(source_)));
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Dict& variables) const {
  Evaluator evaluator(source_, variables);
  std::string out;
  evaluator.exec(*body_, out);
  return out;
}

}  // namespace strata::jinja
