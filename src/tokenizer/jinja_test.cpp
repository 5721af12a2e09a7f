// The Jinja subset: syntax, Python-like semantics, whitespace control, and errors that name
// the construct and its position.
#include "tokenizer/jinja.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace strata::jinja {
namespace {

std::string render(const std::string& source,
                   const nlohmann::json& vars = nlohmann::json::object()) {
  Dict d;
  for (auto it = vars.begin(); it != vars.end(); ++it)
    d.set(it.key(), Value::from_json(it.value()));
  return Template(source).render(d);
}

std::string error_of(const std::string& source,
                     const nlohmann::json& vars = nlohmann::json::object()) {
  try {
    render(source, vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, ExpressionsFollowPython) {
  EXPECT_EQ(
      render("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 2 ** 10 }}"),
      "7|3|-4|2|3.5|1024");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }}|{{ 'ab' * 2 }}|{{ [1, 2] + [3] }}"),
            "a1None|abab|[1, 2, 3]");
  EXPECT_EQ(render("{{ {'a': 1, 'b': 'x'} }}|{{ (1, 2) }}|{{ true }}|{{ 1.0 }}"),
            "{'a': 1, 'b': 'x'}|[1, 2]|True|1.0");
  EXPECT_EQ(
      render("{{ 'yes' if 1 in [1, 2] else 'no' }}|{{ 'b' not in 'abc' }}|{{ not (1 == 1.0) }}"),
      "yes|False|False");
  EXPECT_EQ(render("{{ x[::-1] }}|{{ x[1:] }}|{{ x[-1] }}|{{ s[1:3] }}|{{ s[-1] }}",
                   {{"x", {1, 2, 3}}, {"s", "héllo"}}),
            "[3, 2, 1]|[2, 3]|3|él|o");
  EXPECT_EQ(render("{{ 0 or 'b' }}|{{ 'a' and 'b' }}|{{ missing is defined }}|{{ none is none }}"),
            "b|b|False|True");
}

TEST(Jinja, StringMethodsAndFilters) {
  EXPECT_EQ(render("{{ '  hi  '.strip() }}|{{ 'xxhixx'.lstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ "
                   "'a b  c'.split() }}"),
            "hi|hixx|['a', 'b', '', 'c']|['a', 'b', 'c']");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ "
                   "'Hello'.upper() }}|{{ 'a-b'.replace('-', '+') }}"),
            "True|True|HELLO|a+b");
  EXPECT_EQ(render("{{ ' x ' | trim }}|{{ [1, 2, 3] | length }}|{{ 'héllo' | length }}|{{ [3, 1, "
                   "2] | sort | join(',') }}"),
            "x|3|5|1,2,3");
  EXPECT_EQ(render("{{ {'a': [1, 'é', none, true]} | tojson }}|{{ undefined_var | default('d') }}"),
            "{\"a\": [1, \"é\", null, true]}|d");
  // Objects from ordered JSON (a request's tools) keep the client's key order, as Python's
  // dicts and json.dumps do; nlohmann::json's objects come sorted.
  Dict ordered;
  ordered.set("t", Value::from_json(nlohmann::ordered_json::parse(
                       R"({"type": "function", "function": {"name": "f", "args": [2, 1]}})")));
  EXPECT_EQ(Template("{{ t | tojson }}").render(ordered),
            R"({"type": "function", "function": {"name": "f", "args": [2, 1]}})");
  EXPECT_EQ(render("{{ t | tojson }}", {{"t", {{"type", 1}, {"function", 2}}}}),
            R"({"function": 2, "type": 1})");
  // Escapes as Python's json.dumps writes them (json.dumps('q"b\\\n\x01\t/é', ensure_ascii=False)).
  EXPECT_EQ(render("{{ s | tojson }}", {{"s", "q\"b\\\n\x01\t/é"}}),
            "\"q\\\"b\\\\\\n\\u0001\\t/é\"");
  EXPECT_EQ(
      render(
          "{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}",
          {{"msgs", {{{"role", "user"}, {"content", "a"}}, {{"role", "bot"}, {"content", "b"}}}}}),
      "['a']");
  EXPECT_EQ(render("{{ d.get('a') }}|{{ d.get('z', 0) }}|{% for k, v in d.items() %}{{ k }}={{ v "
                   "}};{% endfor %}",
                   {{"d", {{"a", 1}, {"b", 2}}}}),
            "1|0|a=1;b=2;");
}

TEST(Jinja, StatementsScopesAndLoops) {
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif "
                   "%}{% endfor %}"),
            "11,22,33");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{% if x > 5 %}{% break %}{% endif %}{{ x "
                   "}}{% endfor %}"),
            "135");
  // `set` in a loop stays there; a namespace carries state out.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1, 2] %}{% set ns.n = ns.n + i %}{% "
                   "endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(render("{% macro greet(name, p='!') %}hi {{ name }}{{ p }}{% endmacro %}{{ greet('a') "
                   "}} {{ greet('b', p='?') }}"),
            "hi a! hi b?");
  EXPECT_EQ(render("{% set block %}in{{ 1 }}{% endset %}[{{ block }}]"), "[in1]");
  EXPECT_EQ(render("{% if a %}A{% elif b %}B{% else %}C{% endif %}", {{"a", false}, {"b", true}}),
            "B");
}

TEST(Jinja, WhitespaceControlLikeTransformers) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render("{% if true %}\n    x\n    {% endif %}\ny"), "    x\ny");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a {{- 'b' -}} c"), "abc");
  EXPECT_EQ(render("a\n{# comment #}\nb\n"), "a\nb");  // the final newline is dropped too
}

// Expected values are Python jinja2's in transformers' environment (its tojson:
// json.dumps(ensure_ascii=False) with indent, separators and sort_keys).
TEST(Jinja, FilterBlocksTojsonOptionsAndIntKeysLikePython) {
  // Each case on its own: an unsupported construct fails that case, not the rest.
  auto safe_render = [](const std::string& source,
                        const nlohmann::json& vars = nlohmann::json::object()) {
    try {
      return render(source, vars);
    } catch (const Error& e) {
      return std::string("error: ") + e.what();
    }
  };
  EXPECT_EQ(safe_render("{% filter upper %}abc {{ x }}{% endfilter %}", {{"x", "d"}}), "ABC D");
  EXPECT_EQ(safe_render("{% filter trim %}  a  {% endfilter %}|"), "a|");
  EXPECT_EQ(safe_render("{{ {'b': 1, 'a': [1, 2]} | tojson }}"), R"({"b": 1, "a": [1, 2]})");
  EXPECT_EQ(safe_render("{{ {'b': 1, 'a': 2} | tojson(indent=2) }}"),
            "{\n  \"b\": 1,\n  \"a\": 2\n}");
  EXPECT_EQ(safe_render("{{ {'b': 1, 'a': 2} | tojson(separators=(',', ':')) }}"),
            R"({"b":1,"a":2})");
  EXPECT_EQ(safe_render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"), R"({"a": 2, "b": 1})");
  EXPECT_EQ(safe_render("{% set d = {1: 'one', 2: 'two'} %}{{ d[1] }}{{ d | tojson }}"),
            R"(one{"1": "one", "2": "two"})");
  EXPECT_EQ(safe_render("{% for k, v in {3: 'c', 1: 'a'}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "3=c;1=a;");
  EXPECT_EQ(
      safe_render("{{ (x | selectattr('a') | list) | length }}", {{"x", {{{"a", 1}}, {{"a", 0}}}}}),
      "1");
  EXPECT_EQ(safe_render("{{ undefined_thing | selectattr('a') | list | length }}"), "0");
  EXPECT_EQ(safe_render(
                "{{ '\u00e9' | tojson }}{{ 1.5 | tojson }}{{ none | tojson }}{{ true | tojson }}"),
            "\"\u00e9\"1.5nulltrue");
}

// Where transformers' environment (Jinja2's ImmutableSandboxedEnvironment, markupsafe) behaves
// unlike plain Python, templates see its behavior; expected values are Jinja2's.
TEST(Jinja, SandboxGeneratorsAndMarkupLikeTransformers) {
  EXPECT_EQ(render("{{ none | selectattr('a') | list }}|{{ none | map('upper') | list }}|{{ 'yes' "
                   "if ([] | select) else 'no' }}"),
            "[]|[]|yes");  // a generator is truthy even when empty
  EXPECT_EQ(
      render("{{ ['a', 'b'] | map('upper') | join(',') }}|{{ ['a'] | map('upper') | first }}"),
      "A,B|A");
  EXPECT_NE(error_of("{{ ['a'] | map('upper') | tojson }}")
                .find("Object of type generator is not JSON serializable"),
            std::string::npos);
  EXPECT_NE(error_of("{{ ['a'] | select | length }}").find("'generator' has no len()"),
            std::string::npos);
  EXPECT_EQ(render("{{ 'x'|safe + '<b>' }}|{{ '<b>' + 'y'|safe }}|{{ 'x'|safe ~ '<b>' }}"),
            "x&lt;b&gt;|&lt;b&gt;y|x<b>");
  EXPECT_EQ(render("{{ '<{}|{}>{{}}|{n}'.format('a', 'c', n='b') }}"), "<a|c>{}|b");
  EXPECT_NE(error_of("{{ '{}{0}'.format('a') }}").find("cannot switch"), std::string::npos);
  EXPECT_EQ(
      render("{{ u.description | trim }}|{{ u.d | upper }}", {{"u", nlohmann::json::object()}}),
      "|");
  EXPECT_NE(error_of("{% set x = [] %}{{ x.append(1) }}")
                .find("access to attribute 'append' of 'list' object is unsafe"),
            std::string::npos);
  EXPECT_NE(error_of("{% set d = {} %}{{ d.update({'a': 1}) }}")
                .find("access to attribute 'update' of 'dict' object is unsafe"),
            std::string::npos);
  EXPECT_EQ(render("a{% generation %}{% set x = 1 %}b{{ x }}{% endgeneration %}{{ x }}c"), "ab1c");
}

TEST(Jinja, ErrorsNameTheConstructAndPosition) {
  EXPECT_NE(error_of("ok\n{% include 'x' %}")
                .find("unsupported statement '{% include %}' at line 2, column 4"),
            std::string::npos)
      << error_of("ok\n{% include 'x' %}");
  EXPECT_NE(error_of("{{ 'x' | frobnicate }}").find("unsupported filter 'frobnicate'"),
            std::string::npos);
  EXPECT_NE(error_of("{% if x %}never closed").find("template ended while looking for {% elif %}"),
            std::string::npos)
      << error_of("{% if x %}never closed");
  EXPECT_NE(error_of("{{ raise_exception('Only user and assistant roles') }}")
                .find("Only user and assistant roles"),
            std::string::npos);
  EXPECT_NE(error_of("{{ missing.attr }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 + 'a' }}").find("line 1, column 4"), std::string::npos)
      << error_of("{{ 1 + 'a' }}");
  EXPECT_NE(error_of("{{ 'abc }}").find("never closed"), std::string::npos)
      << error_of("{{ 'abc }}");
}

}  // namespace
}  // namespace strata::jinja
