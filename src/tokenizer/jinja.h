#pragma once
// A Jinja2 subset, enough for the chat templates published with Hugging Face models. It is
// configured like transformers' environment: trim_blocks and lstrip_blocks on, the template's
// final newline dropped, no autoescaping, loop controls (break/continue) enabled.
//
// Supported: {{ }}, {# #}, whitespace control (- and +); {% if/elif/else %}, {% for %} (with
// `else`, `if` filtering, tuple unpacking and the loop object), {% set %} (including
// `ns.attr` on namespaces and {% set x %}...{% endset %}), {% macro %}, {% break %},
// {% continue %}, {% filter %}, {% generation %}; Python-like literals, operators, slicing,
// str/list/dict methods; filters and tests in jinja_builtins.h. Like transformers'
// ImmutableSandboxedEnvironment, methods that change a list or dict in place are refused, and
// lazy filters (map, select, ...) give generators (jinja_value.h). Anything else is an Error
// naming the construct and its line and column, raised when the template is parsed or when
// the construct is evaluated.
#include <memory>
#include <string>

#include "tokenizer/jinja_value.h"

namespace strata::jinja {

struct Node;

class Template {
 public:
  explicit Template(std::string source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `variables` (plus the global functions: range, namespace, dict,
  // raise_exception, strftime_now).
  std::string render(const Dict& variables) const;

 private:
  std::string source_;
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
};

}  // namespace strata::jinja
