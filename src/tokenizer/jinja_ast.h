#pragma once
// Internal to the Jinja engine: lexer output and the syntax tree the parser builds.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace strata::jinja {

// A template split into literal text and the contents of {{ }} and {% %} tags, with
// whitespace control (-, +, trim_blocks, lstrip_blocks) already applied to the text.
struct Chunk {
  enum class Kind { Text, Output, Statement };
  Kind kind;
  std::string text;
  size_t pos;  // offset of the chunk (of the tag's content for tags) in the source
};

struct Token {
  enum class Kind { Name, Int, Float, String, Op, End };
  Kind kind;
  std::string text;  // name, operator, or the unescaped string
  int64_t int_value = 0;
  double float_value = 0;
  size_t pos = 0;
};

// Throws an Error "chat template: MESSAGE at line L, column C".
[[noreturn]] void syntax_error(const std::string& source, size_t pos, const std::string& message);

std::vector<Chunk> lex_template(const std::string& source);
std::vector<Token> lex_expression(const std::string& source, const Chunk& chunk);

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    List,      // children: items
    Tuple,     // children: items
    Dict,      // children: key0, value0, key1, value1, ...
    Attr,      // children[0].name
    Index,     // children[0][children[1]]
    Slice,     // children[0][children[1]:children[2]:children[3]] (null = omitted)
    Call,      // children[0](children[1..], kwargs)
    Filter,    // children[0] | name(children[1..], kwargs)
    Test,      // children[0] is [not] name(children[1..])
    Unary,     // name = "not" | "-" | "+"; children[0]
    Binary,    // name = operator; children[0], children[1]
    Condition  // children[1] if children[0] else children[2] (null = undefined)
  };
  Kind kind;
  size_t pos = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  // FilterBlock: `{% filter f(args) | g %}body{% endfilter %}`, expr the filter chain over
  // the name kFilterBlockBody, bound to the rendered body.
  // Generation: transformers' `{% generation %}body{% endgeneration %}` (its AssistantTracker
  // extension), which marks the assistant's tokens for return_assistant_tokens_mask and
  // otherwise renders the body, in a scope of its own (Jinja2 renders it as a call block).
  enum class Kind {
    Text,
    Output,
    If,
    For,
    Set,
    SetBlock,
    FilterBlock,
    Generation,
    Macro,
    Break,
    Continue
  };
  Kind kind;
  size_t pos = 0;
  std::string text;                  // Text; Set: attribute of `targets[0]` for `set ns.attr`
  ExprPtr expr;                      // Output, Set value, For iterable
  ExprPtr condition;                 // For: `for x in y if condition`
  std::vector<std::string> targets;  // For loop variables; Set / SetBlock names; Macro name
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (condition, body); else has null condition
  Body body, else_body;                            // For, SetBlock, Macro, Generation
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro parameters and defaults
};

// Not an identifier a template can write, so it cannot shadow or be shadowed.
inline constexpr const char* kFilterBlockBody = "\x01filter body";

Body parse_template(const std::string& source, const std::vector<Chunk>& chunks);

}  // namespace strata::jinja
