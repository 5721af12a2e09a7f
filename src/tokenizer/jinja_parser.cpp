// Jinja parsing: statements ({% if %}, {% for %}, {% set %}, {% macro %}, ...) into a tree of
// Nodes, expressions by recursive descent with Jinja2's precedence:
//   x if c else y  <  or  <  and  <  not  <  comparisons, in  <  + -  <  ~  <  * / // %
//   <  **  <  unary -  <  primary with .attr [index] (call) | filter  is test
#include <set>

#include "tokenizer/jinja_ast.h"

namespace strata::jinja {

namespace {

class Parser {
 public:
  Parser(const std::string& source, const std::vector<Chunk>& chunks)
      : source_(source), chunks_(chunks) {}

  Body parse_all() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  // ---- statements ----

  // Parses chunks until a statement whose keyword is in `terminators` (left current, with
  // the keyword consumed, its name in `which`), or until the end when `terminators` is empty.
  Body parse_body(const std::set<std::string>& terminators, std::string& which) {
    Body body;
    while (ci_ < chunks_.size()) {
      const Chunk& chunk = chunks_[ci_++];
      if (chunk.kind == Chunk::Kind::Text) {
        auto node = make_node(Node::Kind::Text, chunk.pos);
        node->text = chunk.text;
        body.push_back(std::move(node));
        continue;
      }
      start_tokens(chunk);
      if (chunk.kind == Chunk::Kind::Output) {
        auto node = make_node(Node::Kind::Output, chunk.pos);
        node->expr = parse_expression();
        expect_end();
        body.push_back(std::move(node));
        continue;
      }
      const Token& keyword = peek();
      if (keyword.kind != Token::Kind::Name) error(keyword, "expected a statement keyword");
      if (terminators.count(keyword.text)) {
        which = keyword.text;
        next();
        return body;
      }
      body.push_back(parse_statement());
    }
    if (!terminators.empty()) {
      std::string expected;
      for (const auto& t : terminators)
        expected += (expected.empty() ? "" : " or ") + std::string("{% ") + t + " %}";
      syntax_error(source_, source_.size(), "template ended while looking for " + expected);
    }
    return body;
  }

  NodePtr parse_statement() {
    const Token keyword = next();
    const std::string& k = keyword.text;
    if (k == "if") return parse_if(keyword.pos);
    if (k == "for") return parse_for(keyword.pos);
    if (k == "set") return parse_set(keyword.pos);
    if (k == "macro") return parse_macro(keyword.pos);
    if (k == "filter") return parse_filter_block(keyword.pos);
    if (k == "generation") {
      expect_end();
      auto node = make_node(Node::Kind::Generation, keyword.pos);
      std::string which;
      node->body = parse_body({"endgeneration"}, which);
      expect_end();
      return node;
    }
    if (k == "break" || k == "continue") {
      expect_end();
      return make_node(k == "break" ? Node::Kind::Break : Node::Kind::Continue, keyword.pos);
    }
    static const std::set<std::string> kBlockEnds = {
        "endif", "endfor", "else", "elif", "endset", "endmacro", "endfilter", "endgeneration"};
    if (kBlockEnds.count(k))
      error(keyword, "unexpected '{% " + k + " %}' with no open block it could close");
    error(keyword, "unsupported statement '{% " + k + " %}'");
  }

  NodePtr parse_if(size_t pos) {
    auto node = make_node(Node::Kind::If, pos);
    ExprPtr condition = parse_expression();
    expect_end();
    for (;;) {
      std::string which;
      Body body = parse_body({"elif", "else", "endif"}, which);
      node->branches.emplace_back(std::move(condition), std::move(body));
      if (which == "endif") {
        expect_end();
        return node;
      }
      if (which == "else") {
        expect_end();
        Body else_body = parse_body({"endif"}, which);
        expect_end();
        node->branches.emplace_back(nullptr, std::move(else_body));
        return node;
      }
      condition = parse_expression();
      expect_end();
    }
  }

  NodePtr parse_for(size_t pos) {
    auto node = make_node(Node::Kind::For, pos);
    do {
      node->targets.push_back(expect_name("a loop variable name"));
    } while (accept_op(","));
    if (!accept_name("in")) error(peek(), "expected 'in' after the loop variables");
    node->expr = parse_or();
    if (accept_name("if")) node->condition = parse_or();
    if (accept_name("recursive")) error(peek(), "unsupported 'recursive' loop");
    expect_end();
    std::string which;
    node->body = parse_body({"else", "endfor"}, which);
    if (which == "else") {
      expect_end();
      node->else_body = parse_body({"endfor"}, which);
    }
    expect_end();
    return node;
  }

  NodePtr parse_set(size_t pos) {
    auto node = make_node(Node::Kind::Set, pos);
    node->targets.push_back(expect_name("a variable name"));
    if (accept_op(".")) {
      node->text = expect_name("an attribute name");
    } else {
      while (accept_op(",")) node->targets.push_back(expect_name("a variable name"));
    }
    if (peek().kind == Token::Kind::End && node->text.empty() && node->targets.size() == 1) {
      node->kind = Node::Kind::SetBlock;
      std::string which;
      node->body = parse_body({"endset"}, which);
      expect_end();
      return node;
    }
    if (!accept_op("=")) error(peek(), "expected '=' in '{% set %}'");
    node->expr = parse_expression();
    if (peek().kind == Token::Kind::Op && peek().text == ",") {
      auto tuple = make_expr(Expr::Kind::Tuple, node->expr->pos);
      tuple->children.push_back(std::move(node->expr));
      while (accept_op(",")) tuple->children.push_back(parse_expression());
      node->expr = std::move(tuple);
    }
    expect_end();
    return node;
  }

  NodePtr parse_filter_block(size_t pos) {
    auto node = make_node(Node::Kind::FilterBlock, pos);
    auto body = make_expr(Expr::Kind::Name, pos);
    body->name = kFilterBlockBody;
    node->expr = parse_call(std::move(body), Expr::Kind::Filter, expect_name("a filter name"));
    while (accept_op("|"))
      node->expr =
          parse_call(std::move(node->expr), Expr::Kind::Filter, expect_name("a filter name"));
    expect_end();
    std::string which;
    node->body = parse_body({"endfilter"}, which);
    expect_end();
    return node;
  }

  NodePtr parse_macro(size_t pos) {
    auto node = make_node(Node::Kind::Macro, pos);
    node->targets.push_back(expect_name("a macro name"));
    expect_op("(");
    if (!accept_op(")")) {
      do {
        std::string name = expect_name("a parameter name");
        ExprPtr default_value;
        if (accept_op("=")) default_value = parse_expression();
        node->params.emplace_back(std::move(name), std::move(default_value));
      } while (accept_op(","));
      expect_op(")");
    }
    expect_end();
    std::string which;
    node->body = parse_body({"endmacro"}, which);
    expect_end();
    return node;
  }

  // ---- expressions ----

  ExprPtr parse_expression() {
    ExprPtr value = parse_or();
    while (accept_name("if")) {
      auto cond = make_expr(Expr::Kind::Condition, value->pos);
      cond->children.push_back(parse_or());
      cond->children.push_back(std::move(value));
      cond->children.push_back(accept_name("else") ? parse_expression() : nullptr);
      value = std::move(cond);
    }
    return value;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (accept_name("or")) left = binary("or", std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (accept_name("and")) left = binary("and", std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (peek_name("not")) {
      auto node = make_expr(Expr::Kind::Unary, next().pos);
      node->name = "not";
      node->children.push_back(parse_not());
      return node;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    for (;;) {
      const Token& t = peek();
      if (t.kind == Token::Kind::Op && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                        t.text == ">" || t.text == "<=" || t.text == ">=")) {
        const std::string op = next().text;
        left = binary(op, std::move(left), parse_math1());
      } else if (peek_name("in")) {
        next();
        left = binary("in", std::move(left), parse_math1());
      } else if (peek_name("not") && ti_ + 1 < tokens_.size() &&
                 tokens_[ti_ + 1].kind == Token::Kind::Name && tokens_[ti_ + 1].text == "in") {
        next();
        next();
        left = binary("not in", std::move(left), parse_math1());
      } else {
        return left;
      }
    }
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (peek_op("+") || peek_op("-")) {
      const std::string op = next().text;
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (accept_op("~")) left = binary("~", std::move(left), parse_math2());
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (peek_op("*") || peek_op("/") || peek_op("//") || peek_op("%")) {
      const std::string op = next().text;
      left = binary(op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (accept_op("**")) left = binary("**", std::move(left), parse_unary(true));
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (peek_op("-") || peek_op("+")) {
      node = make_expr(Expr::Kind::Unary, peek().pos);
      node->name = next().text;
      node->children.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filters(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token t = next();
    switch (t.kind) {
      case Token::Kind::Name: {
        if (t.text == "true" || t.text == "True") return literal(Value(true), t.pos);
        if (t.text == "false" || t.text == "False") return literal(Value(false), t.pos);
        if (t.text == "none" || t.text == "None") return literal(Value::none(), t.pos);
        auto node = make_expr(Expr::Kind::Name, t.pos);
        node->name = t.text;
        return node;
      }
      case Token::Kind::String: {
        std::string s = t.text;
        while (peek().kind == Token::Kind::String) s += next().text;  // "a" "b" concatenates
        return literal(Value(std::move(s)), t.pos);
      }
      case Token::Kind::Int:
        return literal(Value(t.int_value), t.pos);
      case Token::Kind::Float:
        return literal(Value(t.float_value), t.pos);
      case Token::Kind::Op:
        if (t.text == "(") {
          if (accept_op(")")) return make_expr(Expr::Kind::Tuple, t.pos);
          ExprPtr first = parse_expression();
          if (accept_op(")")) return first;
          auto tuple = make_expr(Expr::Kind::Tuple, t.pos);
          tuple->children.push_back(std::move(first));
          while (accept_op(",")) {
            if (peek_op(")")) break;
            tuple->children.push_back(parse_expression());
          }
          expect_op(")");
          return tuple;
        }
        if (t.text == "[") {
          auto list = make_expr(Expr::Kind::List, t.pos);
          while (!accept_op("]")) {
            list->children.push_back(parse_expression());
            if (!accept_op(",")) {
              expect_op("]");
              break;
            }
          }
          return list;
        }
        if (t.text == "{") {
          auto dict = make_expr(Expr::Kind::Dict, t.pos);
          while (!accept_op("}")) {
            dict->children.push_back(parse_expression());
            expect_op(":");
            dict->children.push_back(parse_expression());
            if (!accept_op(",")) {
              expect_op("}");
              break;
            }
          }
          return dict;
        }
        break;
      default:
        break;
    }
    error(t,
          t.kind == Token::Kind::End ? "expression ends too early" : "unexpected '" + t.text + "'");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      if (peek_op(".")) {
        const size_t pos = next().pos;
        auto attr = make_expr(Expr::Kind::Attr, pos);
        if (peek().kind == Token::Kind::Int)
          attr->name = std::to_string(next().int_value);
        else
          attr->name = expect_name("an attribute name");
        attr->children.push_back(std::move(node));
        node = std::move(attr);
      } else if (peek_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (peek_op("(")) {
        node = parse_call(std::move(node), Expr::Kind::Call, "");
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
    const size_t pos = next().pos;  // '['
    ExprPtr parts[3];
    bool is_slice = false;
    for (int part = 0; part < 3; ++part) {
      if (!peek_op(":") && !peek_op("]")) parts[part] = parse_expression();
      if (part < 2 && accept_op(":")) {
        is_slice = true;
        continue;
      }
      break;
    }
    expect_op("]");
    auto node = make_expr(is_slice ? Expr::Kind::Slice : Expr::Kind::Index, pos);
    node->children.push_back(std::move(object));
    if (!is_slice && !parts[0]) error(peek(), "empty subscript '[]'");
    for (int part = 0; part < (is_slice ? 3 : 1); ++part)
      node->children.push_back(std::move(parts[part]));
    return node;
  }

  // `callee(args)`; for filters and tests the subject goes first in `children`.
  ExprPtr parse_call(ExprPtr subject, Expr::Kind kind, const std::string& name) {
    auto node = make_expr(kind, subject->pos);
    node->name = name;
    node->children.push_back(std::move(subject));
    if (!accept_op("(")) return node;
    while (!accept_op(")")) {
      if (peek().kind == Token::Kind::Name && ti_ + 1 < tokens_.size() &&
          tokens_[ti_ + 1].text == "=" && tokens_[ti_ + 1].kind == Token::Kind::Op) {
        std::string key = next().text;
        next();
        node->kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (peek_op("*") || peek_op("**"))
          error(peek(), "unsupported '*args' / '**kwargs' in a call");
        node->children.push_back(parse_expression());
      }
      if (!accept_op(",")) {
        expect_op(")");
        break;
      }
    }
    return node;
  }

  ExprPtr parse_filters(ExprPtr node) {
    for (;;) {
      if (accept_op("|")) {
        std::string name = expect_name("a filter name");
        node = parse_call(std::move(node), Expr::Kind::Filter, name);
      } else if (peek_name("is")) {
        next();
        const bool negated = accept_name("not");
        std::string name;
        const Token& t = peek();
        if (t.kind == Token::Kind::Name)
          name = next().text;
        else if (t.kind == Token::Kind::Op && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                               t.text == ">" || t.text == "<=" || t.text == ">="))
          name = next().text;
        else
          error(t, "expected a test name after 'is'");
        node = parse_call(std::move(node), Expr::Kind::Test, name);
        node->negated = negated;
        // `x is divisibleby 3`: one argument without parentheses.
        const Token& arg = peek();
        if (node->children.size() == 1 && node->kwargs.empty() &&
            (arg.kind == Token::Kind::Int || arg.kind == Token::Kind::Float ||
             arg.kind == Token::Kind::String))
          node->children.push_back(parse_primary());
      } else if (peek_op("(") && node->kind == Expr::Kind::Filter) {
        node = parse_call(std::move(node), Expr::Kind::Call, "");
      } else {
        return node;
      }
    }
  }

  // ---- helpers ----

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right) {
    auto node = make_expr(Expr::Kind::Binary, left->pos);
    node->name = op;
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    return node;
  }
  static ExprPtr literal(Value v, size_t pos) {
    auto node = make_expr(Expr::Kind::Literal, pos);
    node->value = std::move(v);
    return node;
  }
  static ExprPtr make_expr(Expr::Kind kind, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  static NodePtr make_node(Node::Kind kind, size_t pos) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->pos = pos;
    return n;
  }

  void start_tokens(const Chunk& chunk) {
    tokens_ = lex_expression(source_, chunk);
    ti_ = 0;
  }
  const Token& peek() const { return tokens_[ti_]; }
  Token next() {
    const Token t = tokens_[ti_];
    if (t.kind != Token::Kind::End) ++ti_;
    return t;
  }
  bool peek_op(const char* op) const { return peek().kind == Token::Kind::Op && peek().text == op; }
  bool peek_name(const char* name) const {
    return peek().kind == Token::Kind::Name && peek().text == name;
  }
  bool accept_op(const char* op) {
    if (!peek_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(const char* name) {
    if (!peek_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) error(peek(), std::string("expected '") + op + "'");
  }
  std::string expect_name(const char* what) {
    if (peek().kind != Token::Kind::Name) error(peek(), std::string("expected ") + what);
    return next().text;
  }
  void expect_end() {
    if (peek().kind != Token::Kind::End)
      error(peek(), "unexpected '" + peek().text + "' (expected the end of the tag)");
  }
  [[noreturn]] void error(const Token& t, const std::string& message) const {
    syntax_error(source_, t.pos, message);
  }

  const std::string& source_;
  const std::vector<Chunk>& chunks_;
  size_t ci_ = 0;
  std::vector<Token> tokens_;
  size_t ti_ = 0;
};

}  // namespace

Body parse_template(const std::string& source, const std::vector<Chunk>& chunks) {
  return Parser(source, chunks).parse_all();
}

}  // namespace strata::jinja
