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

// Small everywhere but the vocabulary: the LM head over 151k tokens is the cost.
std::unique_ptr<ModelRunner> qwen3_vocab_runner(int max_requests,
                                                const std::string& device = "cpu") {
  const tok::Tokenizer& tokenizer = test::fixture_tokenizer("qwen3");
  json cfg = json::parse(std::ifstream(test::fixture_dir("qwen3") + "/config.json"));
  cfg["vocab_size"] = tokenizer.vocab_size();
  cfg["num_hidden_layers"] = 1;
  cfg["layer_types"] = {"full_attention"};
  cfg["hidden_size"] = 32;
  cfg["head_dim"] = 16;
  cfg["num_attention_heads"] = 2;
  cfg["num_key_value_heads"] = 1;
  cfg["intermediate_size"] = 32;
  RunnerOptions ro = test::default_options(1, max_requests);
  ro.device = device;
  ro.load_format = LoadFormat::Dummy;
  ro.max_total_tokens = 64 * 256;
  return std::make_unique<ModelRunner>(
      ModelConfig::from_json(cfg, "qwen3 config with qwen3's vocabulary"), ro);
}

SchedulerOptions qwen3_options() {
  SchedulerOptions so;
  so.eos_token_ids = {*test::fixture_tokenizer("qwen3").token_to_id("<|im_end|>")};
  return so;
}

std::shared_ptr<const grammar::TokenVocabulary> qwen3_vocabulary() {
  static const auto vocab =
      grammar::TokenVocabulary::from_tokenizer(test::fixture_tokenizer("qwen3"));
  return vocab;
}

// Runs the scheduler dry; the tokens and finish reason of each request id.
struct Outputs {
  std::map<uint64_t, std::vector<int>> tokens;
  std::map<uint64_t, std::string> reasons;
};
Outputs run_all(Scheduler& s) {
  Outputs out;
  for (int steps = 0; s.has_work() && steps < 100000; ++steps)
    for (auto& o : s.step()) {
      auto& tokens = out.tokens[o.id];
      tokens.insert(tokens.end(), o.token_ids.begin(), o.token_ids.end());
      if (o.finished) out.reasons[o.id] = o.finish_reason;
    }
  EXPECT_FALSE(s.has_work());
  return out;
}

ServeRequest constrained(const std::vector<int>& prompt,
                         std::shared_ptr<grammar::CompiledGrammar> grammar, int seed,
                         float temperature = 1.0f) {
  ServeRequest r;
  r.input_ids = prompt;
  r.sampling.temperature = temperature;
  r.sampling.seed = static_cast<uint64_t>(seed);
  r.sampling.max_new_tokens = 200;
  r.grammar = std::move(grammar);
  return r;
}

// The output as text, its stop token dropped.
std::string output_text(std::vector<int> ids) {
  const tok::Tokenizer& tokenizer = test::fixture_tokenizer("qwen3");
  if (!ids.empty() && ids.back() == qwen3_options().eos_token_ids[0]) ids.pop_back();
  return tokenizer.decode(ids);
}

// Whether `text`, an output under c, is what c allows (failures name the output).
void expect_valid(const Case& c, const std::string& text) {
  SCOPED_TRACE(c.spec.text + " -> " + text);
  if (c.spec.kind == GrammarSpec::Kind::JsonSchema) {
    ASSERT_TRUE(json::accept(text));
    const json schema = json::parse(c.reference);
    EXPECT_EQ(grammar::suite::validate(json::parse(text), schema, schema), "");
  } else if (c.spec.kind == GrammarSpec::Kind::Regex) {
    EXPECT_TRUE(grammar::suite::pattern_search("^(?:" + c.reference + ")$", text));
  } else {
    ASSERT_TRUE(json::accept(text));  // the EBNF of suite_cases writes JSON arrays
    EXPECT_TRUE(json::parse(text).is_array());
  }
}

// The schemas of the suite (CI: those whose masks are cheap to warm up; the token-mask unit
// test decodes all of them; STRATA_HEAVY_TESTS=1: every one), regexes and an EBNF grammar.
std::vector<Case> suite_cases(bool all_schemas) {
  std::vector<Case> cases;
  for (const auto& c : grammar::suite::schemas())
    if (all_schemas || c.name == "nested" || c.name == "enums" || c.name == "refs" ||
        c.name == "patterns")
      cases.push_back({{GrammarSpec::Kind::JsonSchema, c.schema}, c.schema});
  for (const char* re :
       {"[0-9]{3}-[0-9]{4}", "(yes|no|maybe)!?", "[a-z]{1,8}@[a-z]{1,8}\\.(com|org)"})
    cases.push_back({{GrammarSpec::Kind::Regex, re}, re});
  const std::string ebnf =
      "root ::= \"[\" item (\",\" item){0,3} \"]\"\nitem ::= \"0\" | [1-9] [0-9]{0,2} | \"true\"";
  cases.push_back({{GrammarSpec::Kind::Ebnf, ebnf}, ""});
  return cases;
}

// The compiled grammar of `spec`, one per test binary: the tests share its mask caches (the
// first visits of a state walk the vocabulary, which is what a test pays for most).
std::shared_ptr<grammar::CompiledGrammar> compiled(const GrammarSpec& spec) {
  static std::map<std::pair<int, std::string>, std::shared_ptr<grammar::CompiledGrammar>> cache;
  auto& g = cache[{static_cast<int>(spec.kind), spec.text}];
  if (!g)
    g = std::make_shared<grammar::CompiledGrammar>(grammar::compile_spec(spec), qwen3_vocabulary());
  return g;
}

// Submits `seeds` requests per case (ids case * seeds + seed), all batched into one run.
void submit_cases(Scheduler& s, const std::vector<Case>& cases, int seeds) {
  const std::vector<int> prompt = test::fixture_tokenizer("qwen3").encode("Answer in JSON:");
  for (size_t c = 0; c < cases.size(); ++c)
    for (int seed = 0; seed < seeds; ++seed) {
      ServeRequest r = constrained(prompt, compiled(cases[c].spec), seed);
      s.validate(r);
      s.submit(c * seeds + seed, r);
    }
}

// Every output of the suite parses and validates: with the grammar masks computed before each
// pass and sent with it (sequential), computed on the worker while the forward runs and drawn
// from after it (overlap, the default), and with jump-forward too. Overlap changes when the
// masks are computed, never what is drawn: it gives the sequential run's tokens for every seed.
TEST(StructuredOutput, SchedulerOutputsValidateForEverySeed) {
  const bool heavy = std::getenv("STRATA_HEAVY_TESTS") != nullptr;
  const std::vector<Case> cases = suite_cases(heavy);
  const int seeds = heavy ? 100 : 3;
  enum Mode { kSequential, kOverlap, kJumpForward };
  std::map<Mode, Outputs> runs;
  for (Mode mode : {kSequential, kOverlap, kJumpForward}) {
    const char* name[] = {"sequential masks", "overlapped masks", "jump-forward"};
    SCOPED_TRACE(name[mode]);
    auto runner = qwen3_vocab_runner(64);
    SchedulerOptions so = qwen3_options();
    so.overlap_grammar_masks = mode != kSequential;
    so.enable_jump_forward = mode == kJumpForward;
    Scheduler s(*runner, so);
    s.set_retokenizer(
        [](const std::string& text) { return test::fixture_tokenizer("qwen3").encode(text); });
    submit_cases(s, cases, seeds);
    const auto start = std::chrono::steady_clock::now();
    const Outputs& out = runs[mode] = run_all(s);
    std::printf("%s: %zu requests decoded in %.2f s in %lld passes (%lld tokens jumped)\n",
                name[mode], out.tokens.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                static_cast<long long>(s.stats().forward_passes),
                static_cast<long long>(s.stats().jump_forward_tokens));
    ASSERT_EQ(out.tokens.size(), cases.size() * seeds);
    for (const auto& [rid, ids] : out.tokens) {
      EXPECT_EQ(out.reasons.at(rid), "stop");
      expect_valid(cases[rid / seeds], output_text(ids));
    }
  }
  for (const auto& [rid, ids] : runs[kSequential].tokens) {
    SCOPED_TRACE(cases[rid / seeds].spec.text + " seed " + std::to_string(rid % seeds));
    EXPECT_EQ(runs[kOverlap].tokens.at(rid), ids);
  }
}

// Jump-forward on a schema whose keys are long and fixed: the bytes of each key (and the
// punctuation around it) are forced, so they are appended as tokens without a draw each and
// computed in one extend. The seeds run batched, with mixed chunks so that those extends
// share the decode passes of the others (as they do without jump-forward): the run with
// jump-forward takes fewer passes, and every output still validates.
//
// What equality to expect, even greedy on this deterministic model: the first draw is the
// same in both runs (same prompt, logits and seed), and so are the bytes the grammar forces
// after it, so both texts start with that token's bytes + the forced bytes. Past that the
// token sequences differ: jump-forward appends the tokenizer's own tokens for the forced text
// (re-aligned with the drawn token), while without it the model draws them one by one under
// the mask and may spell the same bytes with other tokens (`"` `name` against `"name`); the
// next logits then read other tokens, so the free parts (the values) differ and whole outputs
// can not be expected to be equal.
TEST(StructuredOutput, JumpForwardSkipsForcedKeysAndStillValidates) {
  const std::string schema = R"({"type": "object", "properties": {
      "customer_identification_number": {"type": "integer"},
      "preferred_method_of_communication":
          {"enum": ["electronic_mail", "telephone_call", "postal_letter"]},
      "has_subscribed_to_the_weekly_newsletter": {"type": "boolean"}},
    "required": ["customer_identification_number", "preferred_method_of_communication",
                 "has_subscribed_to_the_weekly_newsletter"],
    "additionalProperties": false})";
  const Case c{{GrammarSpec::Kind::JsonSchema, schema}, schema};
  const auto grammar = compiled(c.spec);
  const tok::Tokenizer& tokenizer = test::fixture_tokenizer("qwen3");
  const std::vector<int> prompt = tokenizer.encode("Answer in JSON:");
  const int seeds = std::getenv("STRATA_HEAVY_TESTS") ? 100 : 4;
  std::map<bool, Outputs> runs;
  std::map<bool, SchedulerStats> stats;
  for (bool jump : {false, true}) {
    auto runner = qwen3_vocab_runner(64);
    SchedulerOptions so = qwen3_options();
    so.enable_jump_forward = jump;
    so.enable_mixed_chunk = true;
    Scheduler s(*runner, so);
    s.set_retokenizer([&tokenizer](const std::string& text) { return tokenizer.encode(text); });
    for (int seed = 0; seed <= seeds; ++seed)  // the last one greedy
      s.submit(seed, constrained(prompt, grammar, seed, seed == seeds ? 0.0f : 1.0f));
    runs[jump] = run_all(s);
    stats[jump] = s.stats();
  }
  std::printf("passes: %lld without jump-forward, %lld with (%lld tokens jumped)\n",
              static_cast<long long>(stats[false].forward_passes),
              static_cast<long long>(stats[true].forward_passes),
              static_cast<long long>(stats[true].jump_forward_tokens));
  EXPECT_EQ(stats[false].jump_forward_tokens, 0);
  EXPECT_GT(stats[true].jump_forward_tokens, 0);
  EXPECT_LT(stats[true].forward_passes, stats[false].forward_passes);
  for (bool jump : {false, true})
    for (const auto& [rid, ids] : runs[jump].tokens) {
      EXPECT_EQ(runs[jump].reasons.at(rid), "stop");
      expect_valid(c, output_text(ids));
    }
  for (int seed = 0; seed <= seeds; ++seed) {
    const std::vector<int>& plain = runs[false].tokens.at(seed);
    ASSERT_FALSE(plain.empty());
    grammar::GrammarMatcher m(grammar);
    ASSERT_TRUE(m.accept_token(plain[0]));
    const std::string common =
        tokenizer.decode(std::vector<int>{plain[0]}) + m.forced_bytes(1 << 20);
    SCOPED_TRACE("seed " + std::to_string(seed) + ", common start " + common);
    EXPECT_EQ(output_text(plain).substr(0, common.size()), common);
    EXPECT_EQ(output_text(runs[true].tokens.at(seed)).substr(0, common.size()), common);
  }
}

// The same on the GPU, where decode passes replay CUDA graphs: with overlap the graph holds
// the forward only and the masks reach the device after it is queued, outside the graph,
// before the draw. The tokens equal those of masks sent with the pass, for every seed.
TEST(StructuredOutput, CudaOverlappedMasksDrawWhatSequentialMasksDraw) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "GPU test skipped: " << why;
  const std::vector<Case> cases = suite_cases(false);
  const int seeds = 3;
  std::map<bool, Outputs> runs;
  for (bool overlap : {false, true}) {
    auto runner = qwen3_vocab_runner(64, "cuda");
    SchedulerOptions so = qwen3_options();
    so.overlap_grammar_masks = overlap;
    Scheduler s(*runner, so);
    submit_cases(s, cases, seeds);
    runs[overlap] = run_all(s);
    ASSERT_EQ(runs[overlap].tokens.size(), cases.size() * seeds);
    for (const auto& [rid, ids] : runs[overlap].tokens) {
      EXPECT_EQ(runs[overlap].reasons.at(rid), "stop");
      expect_valid(cases[rid / seeds], output_text(ids));
    }
  }
  for (const auto& [rid, ids] : runs[false].tokens) {
    SCOPED_TRACE(cases[rid / seeds].spec.text + " seed " + std::to_string(rid % seeds));
    EXPECT_EQ(runs[true].tokens.at(rid), ids);
  }
}

}  // namespace
}  // namespace strata
