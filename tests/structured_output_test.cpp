// Structured output through the scheduler: a dummy-weight model whose vocabulary is qwen3's
// (151k tokens; random weights make garbage unless the grammar holds them) decodes the schema
// suite, regexes and an EBNF grammar at temperature 1, all seeds batched into one scheduler
// run; every output must parse and validate (match, for regexes) and end by "stop".
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema_suite.h"
#include "model/config.h"
#include "model/weights.h"
#include "runtime/scheduler.h"
#include "test_util.h"
#include "tokenizer_fixtures.h"

namespace strata {
namespace {

using grammar::GrammarSpec;

struct Case {
  GrammarSpec spec;
  std::string reference;  // schema JSON, or the regex a PCRE2 full match checks
};

TEST(StructuredOutput, SchedulerOutputsValidateForEverySeed) {
  const tok::Tokenizer& tokenizer = test::fixture_tokenizer("qwen3");
  json cfg = json::parse(std::ifstream(test::fixture_dir("qwen3") + "/config.json"));
  cfg["vocab_size"] = tokenizer.vocab_size();
  cfg["num_hidden_layers"] = 1;
  cfg["layer_types"] = {"full_attention"};
  // Small everywhere but the vocabulary: the LM head over 151k tokens is the cost.
  cfg["hidden_size"] = 32;
  cfg["head_dim"] = 16;
  cfg["num_attention_heads"] = 2;
  cfg["num_key_value_heads"] = 1;
  cfg["intermediate_size"] = 32;
  RunnerOptions ro = test::default_options(1, 64);
  ro.load_format = LoadFormat::Dummy;
  ro.max_total_tokens = 64 * 256;
  ModelRunner runner(ModelConfig::from_json(cfg, "qwen3 config with qwen3's vocabulary"), ro);
  SchedulerOptions so;
  so.eos_token_ids = {*tokenizer.token_to_id("<|im_end|>")};
  Scheduler s(runner, so);

  const auto vocab = grammar::TokenVocabulary::from_tokenizer(tokenizer);
  std::vector<Case> cases;
  // CI runs the schemas whose masks are cheap to warm up (the token-mask unit test decodes all
  // of them); STRATA_HEAVY_TESTS=1 runs every schema with 100 seeds.
  const bool heavy = std::getenv("STRATA_HEAVY_TESTS") != nullptr;
  for (const auto& c : grammar::suite::schemas())
    if (heavy || c.name == "nested" || c.name == "enums" || c.name == "refs" ||
        c.name == "patterns")
      cases.push_back({{GrammarSpec::Kind::JsonSchema, c.schema}, c.schema});
  for (const char* re :
       {"[0-9]{3}-[0-9]{4}", "(yes|no|maybe)!?", "[a-z]{1,8}@[a-z]{1,8}\\.(com|org)"})
    cases.push_back({{GrammarSpec::Kind::Regex, re}, re});
  const std::string ebnf =
      "root ::= \"[\" item (\",\" item){0,3} \"]\"\nitem ::= \"0\" | [1-9] [0-9]{0,2} | \"true\"";
  cases.push_back({{GrammarSpec::Kind::Ebnf, ebnf}, ""});

  const int seeds = heavy ? 100 : 4;
  const std::vector<int> prompt = tokenizer.encode("Answer in JSON:");
  std::map<uint64_t, std::pair<size_t, std::vector<int>>> outputs;  // id -> (case, tokens)
  std::map<uint64_t, std::string> reasons;
  uint64_t id = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    auto compiled =
        std::make_shared<grammar::CompiledGrammar>(grammar::compile_spec(cases[c].spec), vocab);
    for (int seed = 0; seed < seeds; ++seed) {
      ServeRequest r;
      r.input_ids = prompt;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = static_cast<uint64_t>(seed);
      r.sampling.max_new_tokens = 200;
      r.grammar = compiled;
      s.validate(r);
      outputs[id].first = c;
      s.submit(id++, r);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  for (int steps = 0; s.has_work() && steps < 100000; ++steps)
    for (auto& o : s.step()) {
      auto& tokens = outputs[o.id].second;
      tokens.insert(tokens.end(), o.token_ids.begin(), o.token_ids.end());
      if (o.finished) reasons[o.id] = o.finish_reason;
    }
  ASSERT_FALSE(s.has_work());
  std::printf("%zu requests decoded in %.2f s\n", outputs.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  for (auto& [rid, entry] : outputs) {
    const Case& c = cases[entry.first];
    std::vector<int> ids = entry.second;
    if (!ids.empty() && ids.back() == so.eos_token_ids[0]) ids.pop_back();
    const std::string text = tokenizer.decode(ids);
    SCOPED_TRACE(c.spec.text + " -> " + text);
    EXPECT_EQ(reasons[rid], "stop");
    if (c.spec.kind == GrammarSpec::Kind::JsonSchema) {
      ASSERT_TRUE(json::accept(text));
      const json schema = json::parse(c.reference);
      EXPECT_EQ(grammar::suite::validate(json::parse(text), schema, schema), "");
    } else if (c.spec.kind == GrammarSpec::Kind::Regex) {
      EXPECT_TRUE(grammar::suite::pattern_search("^(?:" + c.reference + ")$", text));
    } else {
      ASSERT_TRUE(json::accept(text));  // the EBNF above writes JSON arrays
      EXPECT_TRUE(json::parse(text).is_array());
    }
  }
}

}  // namespace
}  // namespace strata
