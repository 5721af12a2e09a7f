#pragma once
// Shared by the pipeline-parallel tests on CPU (pp_test.cpp) and GPU (pp_cuda_test.cpp) and the
// tensor-parallel ones (tp_test.cpp, tp_cuda_test.cpp): they
// run `strata generate` as a child process (it starts its stages through mpirun) and compare
// its JSON lines.
#include <string>
#include <vector>

#include "test_util.h"

namespace strata::test {

struct Generation {
  std::vector<std::vector<int>> ids;
  std::vector<std::vector<std::vector<float>>> logits;  // [prompt][step][vocab], when returned
};

// `strata generate --json ARGS`: every prompt's output ids, and its logits where the output
// has them (--return-logits). A non-zero exit is a test failure.
Generation run_generate(const std::string& args);

// `strata generate ARGS` under `timeout`, so that a job that fails to end makes the test fail
// (exit 124) instead of hanging the suite: its exit status, its stderr and its wall time. For
// the failure tests, whose jobs must end by themselves.
int run_generate_bounded(const std::string& args, std::string* err, double* seconds);

// The same ids, and every step's logits within `tolerance` (max abs difference).
void expect_same(const Generation& a, const Generation& b, double tolerance,
                 const std::string& what);

// The reference prompts (lengths 1, 7, 23, 45) and a fifth of 30 tokens, so that micro-batches
// come out uneven (5 requests over 2, 3 or 4 stages).
std::vector<std::vector<int>> pipeline_test_prompts(const Reference& ref);

// `strata generate ARGS` with each GPU fault of STRATA_PP_FAULT in turn (process 1 exits, 0 or
// 1 hangs, 1 runs out of memory, 0 traps in a kernel, after its first pass): every run ends by
// itself, non-zero, within 60 s, with an error naming the cause. One line per fault, `label`
// first.
void expect_gpu_faults_end_the_job(const std::string& args, const std::string& label);

// A logit row's standard deviation (bf16 tolerances are shares of it), and the gap between its
// two largest values (a greedy step closer than the tolerance may pick either).
double row_std(const std::vector<float>& row);
double margin(const std::vector<float>& row);

// A prompts file for --input-ids-file (one comma-separated prompt per line) in the scratch
// directory.
std::string write_prompts_file(const std::vector<std::vector<int>>& prompts);

}  // namespace strata::test
