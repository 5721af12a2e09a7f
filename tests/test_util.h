#pragma once
// Shared helpers for golden and invariance tests over the vendored model fixtures
// (<case>/ in tests/data/models.tar.xz, which the build unpacks into STRATA_MODEL_DATA: a Hugging
// Face directory plus reference.safetensors made by transformers; see tests/data/README.md).
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "runtime/generator.h"

namespace strata::test {

std::string fixture_dir(const std::string& name);

// reference.safetensors of a fixture: p{i}.input_ids, p{i}.logits [L, V],
// p{i}.greedy_ids [10], p{i}.greedy_logits [10, V].
struct Reference {
  std::vector<std::vector<int>> input_ids, greedy_ids;
  std::vector<Tensor> logits, greedy_logits;
  double min_greedy_margin = 0;
  // Per prompt, the smallest gap between a chosen and a left-out expert's router score in the
  // f32 reference (routing_margins.json beside MoE fixtures: tools/routing_margins.py); empty
  // where none was measured.
  std::vector<double> min_routing_gap;
};
Reference load_reference(const std::string& fixture);

// The longest prompt whose expert choices stand clear of bf16 noise (every routing gap at least
// 1e-3; any prompt where no gaps were measured), or -1 when that is a single token. A gap below the
// noise of a bf16 router input flips the choice with the summation order of any kernel upstream, as
// it would in any engine, so bf16 invariance checks (chunked = whole) use this prompt; f32 checks
// use them all.
int routing_stable_prompt(const Reference& ref);

RunnerOptions default_options(int page_size = 1, int max_requests = 8);

// Prefill logits at every position of `ids` (one request, fed in pieces of `chunk` tokens;
// 0 = whole), as [L, V].
Tensor prefill_all_logits(ModelRunner& runner, const std::vector<int>& ids, int chunk = 0);

// Greedy generation for several prompts as one batch.
std::vector<GenerateOutput> greedy(ModelRunner& runner,
                                   const std::vector<std::vector<int>>& prompts, int max_new_tokens,
                                   bool return_logits = true, int chunk = 0);

double max_abs_diff(const float* a, const float* b, int64_t n);
double max_abs_diff(const Tensor& a, const Tensor& b);

// Runner options for a hybrid model with the prefix cache: Mamba state snapshots per
// `strategy` (no_buffer | extra_buffer | auto), one every `track_interval` prompt tokens.
RunnerOptions hybrid_cache_options(const std::string& strategy, int page_size, int max_requests,
                                   int track_interval);

// `n` token ids below 500 (every fixture's vocabulary), a different sequence for each seed.
std::vector<int> synthetic_tokens(int n, int seed);
std::vector<int> concat(std::vector<int> a, const std::vector<int>& b);

// A directory for this test process's files (under the system's temporary directory), made on
// first use and removed with everything in it when the process exits.
std::string scratch_dir();

// Runs the strata binary with `args`; returns exit code, fills stdout/stderr.
int run_strata(const std::string& args, std::string* out, std::string* err);
// Runs a shell command line; returns its exit code, fills stdout/stderr.
int run_command(const std::string& command, std::string* out, std::string* err);

}  // namespace strata::test
