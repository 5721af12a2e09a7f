// Structured output through the HTTP routes (random-weight llama fixture, tiny byte-level
// tokenizer): response_format json_schema / json_object on the OpenAI routes, streamed and
// not; regex and ebnf in /generate's sampling_params; compile errors as 400s naming the field
// and the keyword.
#include <gtest/gtest.h>
#include <httplib.h>

#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_suite.h"
#include "server_harness.h"
#include "test_util.h"

namespace strata {
namespace {

using test::Harness;

const std::string kSchema =
    R"({"type":"object","properties":{"color":{"enum":["red","green"]},"n":{"type":"integer"},
        "ok":{"type":"boolean"}},"required":["color","n","ok"],"additionalProperties":false})";

std::pair<int, json> post(const Harness& h, const std::string& path, const json& body) {
  httplib::Client c = h.client();
  auto res = c.Post(path, body.dump(), "application/json");
  if (!res) return {0, "no answer"};
  return {res->status, json::parse(res->body, nullptr, false)};
}

json chat_body(const json& response_format, bool stream) {
  return {{"model", "llama"},
          {"messages", json::array({{{"role", "user"}, {"content", "Answer in JSON."}}})},
          {"max_tokens", 120},
          {"temperature", 1.0},
          {"seed", 3},
          {"n", 3},
          {"stream", stream},
          {"response_format", response_format}};
}

// The answers (3 choices, not streamed) to a chat asking for kSchema: each stops and
// validates; their texts.
std::vector<std::string> expect_chat_answers_validate(const Harness& h, const json& schema) {
  const json rf = {{"type", "json_schema"},
                   {"json_schema", {{"name", "answer"}, {"schema", schema}}}};
  const auto [status, body] = post(h, "/v1/chat/completions", chat_body(rf, false));
  EXPECT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["choices"].size(), 3u);
  std::vector<std::string> texts;
  for (const json& choice : body["choices"]) {
    const std::string text = choice["message"]["content"];
    SCOPED_TRACE(text);
    EXPECT_EQ(choice["finish_reason"], "stop");
    EXPECT_TRUE(json::accept(text));
    if (json::accept(text)) {
      EXPECT_EQ(grammar::suite::validate(json::parse(text), schema, schema), "");
    }
    texts.push_back(text);
  }
  return texts;
}

TEST(StructuredOutputServer, ChatJsonSchemaAnswersValidate) {
  Harness h({}, 4096, 16, "llama", test::tiny_tokenizer_dir());
  const auto texts = expect_chat_answers_validate(h, json::parse(kSchema));
  ASSERT_EQ(texts.size(), 3u);
  // Properties come in the schema's order, as OpenAI's do.
  for (const std::string& text : texts) EXPECT_EQ(text.rfind("{\"color\":", 0), 0u) << text;
}

// With --enable-jump-forward the keys and punctuation are appended without draws (the
// metrics count them), and the answers still validate, streamed too.
TEST(StructuredOutputServer, JumpForwardAnswersValidate) {
  SchedulerOptions so;
  so.enable_jump_forward = true;
  Harness h(so, 4096, 16, "llama", test::tiny_tokenizer_dir());
  const json schema = json::parse(kSchema);
  const json rf = {{"type", "json_schema"},
                   {"json_schema", {{"name", "answer"}, {"schema", schema}}}};
  EXPECT_EQ(expect_chat_answers_validate(h, schema).size(), 3u);
  EXPECT_GT(h.metric("strata:jump_forward_tokens_total"), 0);
  bool done = false;
  std::string streamed;
  json stream_body = chat_body(rf, true);
  stream_body["n"] = 1;
  for (const json& e : h.stream("/v1/chat/completions", stream_body, &done))
    for (const json& ch : e["choices"]) streamed += ch["delta"].value("content", "");
  EXPECT_TRUE(done);
  SCOPED_TRACE(streamed);
  ASSERT_TRUE(json::accept(streamed));
  EXPECT_EQ(grammar::suite::validate(json::parse(streamed), schema, schema), "");
}

TEST(StructuredOutputServer, StreamedJsonObjectAndCompletionsJsonSchema) {
  Harness h({}, 4096, 16, "llama", test::tiny_tokenizer_dir());
  bool done = false;
  std::string text, finish;
  const json rf = {{"type", "json_schema"},
                   {"json_schema", {{"name", "answer"}, {"schema", json::parse(kSchema)}}}};
  json body = chat_body(rf, true);
  body["n"] = 1;
  for (const json& e : h.stream("/v1/chat/completions", body, &done))
    for (const json& ch : e["choices"]) {
      text += ch["delta"].value("content", "");
      if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
    }
  EXPECT_TRUE(done);
  EXPECT_EQ(finish, "stop");
  ASSERT_TRUE(json::accept(text)) << text;

  // json_object: any object. Random weights may run to max_tokens inside it ("length"); an
  // answer that stopped must be a whole object.
  const auto [ostatus, obody] =
      post(h, "/v1/chat/completions", chat_body({{"type", "json_object"}}, false));
  ASSERT_EQ(ostatus, 200) << obody.dump();
  const auto object_grammar = grammar::test::compile_for_bytes(grammar::json_object_grammar());
  for (const json& choice : obody["choices"]) {
    const std::string t = choice["message"]["content"];
    SCOPED_TRACE(t);
    grammar::GrammarMatcher m(object_grammar);
    EXPECT_TRUE(m.accept_bytes(t));  // a prefix of some JSON object at least
    if (choice["finish_reason"] != "stop") continue;
    ASSERT_TRUE(json::accept(t));
    EXPECT_TRUE(json::parse(t).is_object());
  }

  const json completion = {{"model", "llama"},
                           {"prompt", "x"},
                           {"max_tokens", 120},
                           {"temperature", 1.0},
                           {"response_format",
                            {{"type", "json_schema"},
                             {"json_schema", {{"name", "a"}, {"schema", json::parse(kSchema)}}}}}};
  const auto [status, out] = post(h, "/v1/completions", completion);
  ASSERT_EQ(status, 200) << out.dump();
  const std::string ctext = out["choices"][0]["text"];
  ASSERT_TRUE(json::accept(ctext)) << ctext;
}

TEST(StructuredOutputServer, GenerateRegexEbnfAndJsonSchema) {
  Harness h({}, 4096, 16, "llama", test::tiny_tokenizer_dir());
  auto generate = [&](const json& constraint) {
    json sp = {{"max_new_tokens", 80}, {"temperature", 1.0}, {"seed", 5}};
    sp.update(constraint);
    return post(h, "/generate", {{"text", "hello"}, {"sampling_params", sp}});
  };
  {
    const auto [status, out] = generate({{"regex", "[0-9]{3}-(yes|no)"}});
    ASSERT_EQ(status, 200) << out.dump();
    EXPECT_TRUE(grammar::suite::pattern_search("^[0-9]{3}-(yes|no)$", out["text"])) << out["text"];
  }
  {
    const auto [status, out] =
        generate({{"ebnf", "root ::= \"[\" [a-c]{1,3} (\",\" [a-c]{1,3})* \"]\""}});
    ASSERT_EQ(status, 200) << out.dump();
    EXPECT_TRUE(grammar::suite::pattern_search("^\\[[a-c]{1,3}(,[a-c]{1,3})*\\]$", out["text"]))
        << out["text"];
  }
  {
    const auto [status, out] = generate({{"json_schema", kSchema}});  // SGLang sends a string
    ASSERT_EQ(status, 200) << out.dump();
    const json schema = json::parse(kSchema);
    ASSERT_TRUE(json::accept(out["text"].get<std::string>())) << out["text"];
    EXPECT_EQ(grammar::suite::validate(json::parse(out["text"].get<std::string>()), schema, schema),
              "");
  }
}

TEST(StructuredOutputServer, GenerateJsonSchemaObjectKeepsPropertyOrder) {
  Harness h({}, 4096, 16, "llama", test::tiny_tokenizer_dir());
  // Written by hand: "z" before "a", which a sorted JSON object would swap.
  const std::string body = R"({"text": "hi", "sampling_params": {"max_new_tokens": 60,
      "temperature": 1.0, "seed": 2, "json_schema": {"type": "object", "properties": {
      "z": {"type": "boolean"}, "a": {"enum": [1, 2]}}, "required": ["z", "a"],
      "additionalProperties": false}}})";
  httplib::Client c = h.client();
  auto res = c.Post("/generate", body, "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const std::string text = json::parse(res->body)["text"];
  EXPECT_TRUE(text.rfind("{\"z\":", 0) == 0 && text.find(",\"a\":") != std::string::npos) << text;
}

TEST(StructuredOutputServer, ConstraintsThatDoNotCompileAre400sNamingTheProblem) {
  Harness h({}, 4096, 16, "llama", test::tiny_tokenizer_dir());
  const json bad_schema = {
      {"type", "json_schema"},
      {"json_schema",
       {{"name", "a"}, {"schema", json::parse(R"({"type":"integer","minimum":3})")}}}};
  auto [status, body] = post(h, "/v1/chat/completions", chat_body(bad_schema, false));
  EXPECT_EQ(status, 400);
  const std::string message = body["error"]["message"];
  EXPECT_NE(message.find("keyword 'minimum' is not supported"), std::string::npos) << message;
  EXPECT_EQ(body["error"]["param"], "response_format");

  std::tie(status, body) =
      post(h, "/generate", {{"text", "a"}, {"sampling_params", {{"regex", "(a"}}}});
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["param"], "regex") << body.dump();
  std::tie(status, body) =
      post(h, "/generate",
           {{"text", "a"}, {"sampling_params", {{"regex", "a"}, {"ebnf", "root ::= \"a\""}}}});
  EXPECT_EQ(status, 400);
  EXPECT_NE(body["error"]["message"].get<std::string>().find("one structured-output constraint"),
            std::string::npos);
  std::tie(status, body) = post(h, "/v1/chat/completions", chat_body({{"type", "xml"}}, false));
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["param"], "response_format");
}

TEST(StructuredOutputServer, GrammarBackendFlagTakesSglangsValues) {
  std::string out, err;
  EXPECT_EQ(test::run_strata(
                "serve --model " + test::fixture_dir("llama") + " --port 0 --grammar-backend fancy",
                &out, &err),
            1);
  EXPECT_NE(err.find("--grammar-backend must be one of xgrammar, outlines, llguidance"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("'fancy'"), std::string::npos) << err;
}

}  // namespace
}  // namespace strata
