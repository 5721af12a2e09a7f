// CPU cost of grammar token masks: for each schema of the suite (src/grammar/
// json_schema_suite.h), constrained random decodes (uniform draws among allowed tokens) with
// the time of every fill_mask call recorded. The first round of decodes starts from a fresh
// CompiledGrammar (cold: position walks of the vocabulary trie happen here); later rounds reuse
// it (warm, as a server does once a schema has been seen). Prints p50/p99/max per phase.
//
//   strata_grammar_bench TOKENIZER_DIR [seeds per round, default 20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema_suite.h"
#include "tokenizer/tokenizer.h"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

void decode(grammar::CompiledGrammar& g, std::shared_ptr<grammar::CompiledGrammar> shared,
            std::mt19937& rng, std::vector<double>& times_us) {
  grammar::GrammarMatcher m(shared);
  std::vector<uint32_t> words((g.vocabulary().size() + 31) / 32);
  std::vector<int> choices;
  for (int step = 0; step < 400; ++step) {
    const auto t0 = Clock::now();
    m.fill_mask(words);
    times_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    choices.clear();
    for (size_t w = 0; w < words.size(); ++w)
      for (uint32_t bits = words[w]; bits; bits &= bits - 1)
        choices.push_back(static_cast<int>(w * 32 + __builtin_ctz(bits)));
    if (m.can_finish()) choices.push_back(-1);
    if (choices.empty()) return;
    const int pick = choices[rng() % choices.size()];
    if (pick < 0 || !m.accept_token(pick)) return;
  }
}

void report(const char* phase, std::vector<double> t) {
  std::sort(t.begin(), t.end());
  auto q = [&](double p) { return t[std::min(t.size() - 1, static_cast<size_t>(p * t.size()))]; };
  std::printf("%-6s masks %7zu  p50 %8.1f us  p99 %9.1f us  max %10.1f us\n", phase, t.size(),
              q(0.5), q(0.99), t.back());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR [seeds]\n", argv[0]);
    return 2;
  }
  const int seeds = argc > 2 ? std::stoi(argv[2]) : 20;
  const auto t_load = Clock::now();
  const tok::Tokenizer tokenizer = tok::Tokenizer::load(argv[1]);
  const auto vocab = grammar::TokenVocabulary::from_tokenizer(tokenizer);
  std::printf("vocabulary %d tokens, prepared in %.2f s\n", vocab->size(),
              std::chrono::duration<double>(Clock::now() - t_load).count());
  std::vector<double> cold_all, warm_all;
  for (const auto& c : grammar::suite::schemas()) {
    const auto t0 = Clock::now();
    auto g = std::make_shared<grammar::CompiledGrammar>(
        grammar::compile_spec({grammar::GrammarSpec::Kind::JsonSchema, c.schema}), vocab);
    const double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::vector<double> cold, warm;
    for (int s = 0; s < seeds; ++s) {
      std::mt19937 rng(s);
      decode(*g, g, rng, cold);
    }
    for (int s = 0; s < seeds; ++s) {
      std::mt19937 rng(1000 + s);  // new outputs, same grammar
      decode(*g, g, rng, warm);
    }
    std::printf("%-9s compile %6.2f ms\n", c.name.c_str(), compile_ms);
    report("  cold", cold);
    report("  warm", warm);
    cold_all.insert(cold_all.end(), cold.begin(), cold.end());
    warm_all.insert(warm_all.end(), warm.begin(), warm.end());
  }
  std::printf("all schemas\n");
  report("  cold", cold_all);
  report("  warm", warm_all);
  return 0;
}
