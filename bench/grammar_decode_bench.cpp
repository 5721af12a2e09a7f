// Decode under JSON schemas through the scheduler on CPU: the wall time of each step with the
// grammar masks computed before the pass (sequential) and on the mask worker while the
// forward runs (overlap), from fresh grammars (cold: the first visits of states walk the
// vocabulary) and again on the same grammars (warm); then the passes jump-forward saves on
// each schema of the suite. The model: a dummy-weight Llama with the tokenizer's vocabulary
// (its LM head is most of a step, as in small real models).
//
//   strata_grammar_decode_bench TOKENIZER_DIR [hidden 256] [layers 4] [requests 16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema_suite.h"
#include "model/config.h"
#include "runtime/scheduler.h"
#include "tokenizer/tokenizer.h"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

struct Run {
  std::vector<double> step_ms;  // decode steps only
  int64_t passes = 0, tokens = 0, jumped = 0;
  double mask_ms = 0, exposed_ms = 0;
};

using Grammars = std::vector<std::shared_ptr<grammar::CompiledGrammar>>;

Grammars compile_suite(const std::shared_ptr<const grammar::TokenVocabulary>& vocab) {
  Grammars g;
  for (const auto& c : grammar::suite::schemas())
    g.push_back(std::make_shared<grammar::CompiledGrammar>(
        grammar::compile_spec({grammar::GrammarSpec::Kind::JsonSchema, c.schema}), vocab));
  return g;
}

// `requests` requests, request i under grammars[i % size], seed i, temperature 1.
Run run(ModelRunner& runner, const tok::Tokenizer& tokenizer, const Grammars& grammars,
        int requests, bool overlap, bool jump) {
  SchedulerOptions so;
  for (const char* eos : {"<|im_end|>", "<|eot_id|>", "</s>"})  // qwen3's, llama3's, llama2's
    if (auto id = tokenizer.token_to_id(eos)) so.eos_token_ids = {*id};
  so.overlap_grammar_masks = overlap;
  so.enable_jump_forward = jump;
  so.enable_mixed_chunk = true;  // jump-forward's extends ride along with the decodes
  so.disable_radix_cache = true;
  Scheduler s(runner, so);
  s.set_retokenizer([&tokenizer](const std::string& text) { return tokenizer.encode(text); });
  const std::vector<int> prompt = tokenizer.encode("Answer in JSON:");
  for (int i = 0; i < requests; ++i) {
    ServeRequest r;
    r.input_ids = prompt;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<uint64_t>(i);
    r.sampling.max_new_tokens = 128;
    r.grammar = grammars[i % grammars.size()];
    s.submit(i, r);
  }
  Run out;
  for (int step = 0; s.has_work(); ++step) {
    const auto t0 = Clock::now();
    for (const auto& o : s.step()) out.tokens += static_cast<int64_t>(o.token_ids.size());
    if (step > 0)
      out.step_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  out.passes = s.stats().forward_passes;
  out.jumped = s.stats().jump_forward_tokens;
  out.mask_ms = s.stats().grammar_mask_ms;
  out.exposed_ms = s.stats().grammar_mask_exposed_ms;
  return out;
}

void report(const char* name, Run r) {
  std::sort(r.step_ms.begin(), r.step_ms.end());
  auto q = [&](double p) {
    return r.step_ms[std::min(r.step_ms.size() - 1, static_cast<size_t>(p * r.step_ms.size()))];
  };
  double sum = 0;
  for (double t : r.step_ms) sum += t;
  const double steps = static_cast<double>(r.step_ms.size());
  std::printf(
      "%-18s steps %4zu  mean %6.2f ms  p50 %6.2f ms  p99 %7.2f ms  masks %6.2f ms/step, "
      "waited for %6.2f ms/step\n",
      name, r.step_ms.size(), sum / steps, q(0.5), q(0.99), r.mask_ms / steps,
      r.exposed_ms / steps);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR [hidden] [layers] [requests]\n", argv[0]);
    return 2;
  }
  const int hidden = argc > 2 ? std::stoi(argv[2]) : 256;
  const int layers = argc > 3 ? std::stoi(argv[3]) : 4;
  const int requests = argc > 4 ? std::stoi(argv[4]) : 16;
  const tok::Tokenizer tokenizer = tok::Tokenizer::load(argv[1]);
  const auto vocab = grammar::TokenVocabulary::from_tokenizer(tokenizer);
  json cfg = {{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"hidden_size", hidden},
              {"intermediate_size", 4 * hidden},
              {"num_hidden_layers", layers},
              {"num_attention_heads", hidden / 64},
              {"num_key_value_heads", std::max(1, hidden / 256)},
              {"head_dim", 64},
              {"vocab_size", tokenizer.vocab_size()},
              {"max_position_embeddings", 1024},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 10000.0},
              {"hidden_act", "silu"},
              {"tie_word_embeddings", false}};
  RunnerOptions ro;
  ro.load_format = LoadFormat::Dummy;
  ro.max_running_requests = requests;
  ro.max_context_len = 512;
  ModelRunner runner(ModelConfig::from_json(cfg, "bench config"), ro);
  std::printf("%s; %d requests over the %zu schemas of the suite, temperature 1\n",
              runner.describe().c_str(), requests, grammar::suite::schemas().size());
  for (bool overlap : {false, true}) {
    const Grammars g = compile_suite(vocab);  // fresh: the cold run walks the vocabulary
    const std::string mode = overlap ? "overlap" : "sequential";
    report((mode + ", cold").c_str(), run(runner, tokenizer, g, requests, overlap, false));
    report((mode + ", warm").c_str(), run(runner, tokenizer, g, requests, overlap, false));
  }
  std::printf("jump-forward (warm grammars, %d requests per schema, batched):\n", requests);
  const Grammars all = compile_suite(vocab);
  for (size_t i = 0; i < all.size(); ++i) {
    const Grammars one{all[i]};
    run(runner, tokenizer, one, requests, true, false);  // warm-up
    const Run plain = run(runner, tokenizer, one, requests, true, false);
    const Run jump = run(runner, tokenizer, one, requests, true, true);
    // Draws: tokens sampled one per pass per request, the decode steps of all requests.
    std::printf(
        "  %-9s passes %4lld -> %4lld  draws %5lld -> %5lld  (output tokens %5lld -> %5lld)\n",
        grammar::suite::schemas()[i].name.c_str(), static_cast<long long>(plain.passes),
        static_cast<long long>(jump.passes), static_cast<long long>(plain.tokens),
        static_cast<long long>(jump.tokens - jump.jumped), static_cast<long long>(plain.tokens),
        static_cast<long long>(jump.tokens));
  }
  return 0;
}
