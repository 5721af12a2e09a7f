// Pipeline parallelism: PP = 2, 3, 4 stages (separate processes under mpirun, started by
// `strata generate --pp-size N` itself) give the greedy ids of PP = 1 and its logits within
// 1e-5, batched, for every dense fixture; a stage whose first layer is not 0 runs attention
// from its own pool (DESIGN.md §1.1); bad partitions and dead or hung stages end the job
// with one clear error and a non-zero exit, in bounded time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attention/cpu_backend.h"
#include "core/error.h"
#include "pipeline_test_util.h"
#include "runtime/batch_builder.h"
#include "runtime/generator.h"

namespace strata::test {

namespace {

// PP = N against PP = 1, twice over:
// - with the same batches (one process taking the N micro-batches in turn, one thread per
//   process): logits within 1e-5. This isolates what pipelining adds: the layer split and the
//   hand-over of hidden states and ids. (OpenBLAS's sgemm rounds a row differently for
//   different row counts and thread counts, by up to ~1e-5 on these logits; a different
//   batching is therefore not a pipeline error.)
// - against the default single-process run (one batch of all prompts, all cores): the same
//   greedy ids, logits within the batched-vs-single tolerance of the golden tests.
void expect_pipeline_matches(const std::string& common, const Generation& single,
                             const std::vector<int>& pp_sizes) {
  for (int pp : pp_sizes) {
    const std::string n = std::to_string(pp);
    const Generation staged =
        run_generate("--return-logits " + common + " --threads 1 --pp-size " + n);
    expect_same(run_generate("--return-logits " + common + " --threads 1 --micro-batches " + n),
                staged, 1e-5, "PP=" + n + " vs same batches");
    expect_same(single, staged, 1e-4, "PP=" + n + " vs one batch");
  }
}

struct Case {
  std::string fixture;
  std::vector<int> pp_sizes;  // 2, 3, 4 where the model has that many layers
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.fixture; }
};

class PipelineParallel : public testing::TestWithParam<Case> {};

}  // namespace

TEST_P(PipelineParallel, StagesGiveTheIdsAndLogitsOfOneProcess) {
  const std::string fixture = GetParam().fixture;
  const Reference ref = load_reference(fixture);
  const std::string prompts = write_prompts_file(pipeline_test_prompts(ref));
  const std::string common =
      "--model " + fixture_dir(fixture) + " --input-ids-file " + prompts + " --max-new-tokens 10";
  const Generation single = run_generate("--return-logits " + common);
  ASSERT_EQ(single.ids.size(), 5u);
  for (size_t p = 0; p < ref.greedy_ids.size(); ++p)
    EXPECT_EQ(single.ids[p], ref.greedy_ids[p]) << "prompt " << p;
  expect_pipeline_matches(common, single, GetParam().pp_sizes);
  std::filesystem::remove(prompts);
}

// Every fixture the engine runs end to end; PP = its layer count is among the sizes (4 dense
// layers, 3 DeepSeek layers: the first with a dense MLP, the others MoE). Hybrids: NemotronH's
// 8 layers (Mamba2 M, MLP -, attention *: M - M * - M * -) at PP = 4 give stages [M -] and
// [- M] that hold only Mamba2 layers and a stage [* -] that holds only attention; at PP = 3
// the second stage starts on a Mamba2 layer that is not layer 0 (DESIGN.md §1.1).
INSTANTIATE_TEST_SUITE_P(Fixtures, PipelineParallel,
                         testing::Values(Case{"llama", {2, 3, 4}}, Case{"llama3_rope", {2, 3, 4}},
                                         Case{"llama_bf16", {2, 3, 4}}, Case{"qwen2", {2, 3, 4}},
                                         Case{"qwen3", {2, 3, 4}}, Case{"mistral_swa", {2, 3, 4}},
                                         Case{"deepseek_v2_lite", {2, 3}},
                                         Case{"deepseek_v3", {2, 3}}, Case{"nemotron_h", {2, 3, 4}},
                                         Case{"nemotron_h_moe", {2, 4}}, Case{"bamba", {2, 4}},
                                         Case{"falcon_h1", {2, 4}}, Case{"gemma3", {2, 3}},
                                         Case{"gpt_oss", {2, 3}}, Case{"lfm2", {2, 3, 4}},
                                         Case{"qwen3_next", {2, 3, 4}}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return info.param.fixture;
                         });

// Explicit partitions, chunked prefill and paged KV go through the same pipeline.
TEST(PipelineParallelOptions, PartitionChunkingAndPagesKeepTheResult) {
  const Reference ref = load_reference("llama");
  const std::string prompts = write_prompts_file(pipeline_test_prompts(ref));
  const std::string common =
      "--model " + fixture_dir("llama") + " --input-ids-file " + prompts + " --max-new-tokens 6";
  const Generation same_batches =
      run_generate("--return-logits " + common + " --threads 1 --micro-batches 2");
  expect_same(same_batches,
              run_generate("--return-logits " + common + " --threads 1 --pp-layer-partition 1,3"),
              1e-5, "partition 1,3");
  expect_same(same_batches,
              run_generate("--return-logits " + common +
                           " --threads 1 --pp-size 2 --pp-layer-partition 3,1"),
              1e-5, "partition 3,1");
  const std::string chunked = common + " --chunked-prefill-size 5 --page-size 16";
  expect_pipeline_matches(chunked, run_generate("--return-logits " + chunked), {3});
  std::filesystem::remove(prompts);
}

// DESIGN.md §1.1: a stage that does not own layer 0 runs attention, prefill and split-KV
// decode, with every buffer sized from its own pool. Two stages in one process, fed by hand,
// must reproduce the whole model.
TEST(PipelineStage, LaterStageRunsAttentionFromItsOwnPool) {
  const ModelConfig config = ModelConfig::load(fixture_dir("llama"));
  const Reference ref = load_reference("llama");
  RunnerOptions first_opts = default_options(), second_opts = default_options();
  first_opts.stage = StagePlan{0, 1, true, false};
  second_opts.stage = StagePlan{1, 4, false, true};
  ModelRunner whole(config, default_options()), first(config, first_opts),
      second(config, second_opts);

  ASSERT_NE(second.kv_pool(), nullptr);
  EXPECT_EQ(second.kv_pool()->layer_ids(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(first.kv_pool()->layer_ids(), (std::vector<int>{0}));
  EXPECT_THROW(second.kv_pool()->k_buffer(0), Error);
  auto* backend = dynamic_cast<CpuAttentionBackend*>(second.attention());
  ASSERT_NE(backend, nullptr);
  backend->set_decode_split_tokens(4);  // several KV splits per decode step

  std::vector<GenerateRequest> requests;
  for (const auto& ids : ref.input_ids) {
    GenerateRequest r;
    r.input_ids = ids;
    r.sampling.max_new_tokens = 6;
    r.sampling.stop_at_eos = false;
    requests.push_back(r);
  }
  GenerateOptions gen;
  gen.return_logits = true;
  const auto expected = generate(whole, requests, gen);

  // Each stage's batch built by hand against its own token memory: the prompts in one
  // extend, then one token per request per decode step, the greedy choice of the last stage.
  struct Seq {
    int row_a, row_b;
    std::vector<int> tokens;
    int cached = 0;
    std::vector<int> output;
    std::vector<std::vector<float>> logits;
  };
  std::vector<Seq> seqs;
  for (const auto& r : requests)
    seqs.push_back({first.memory().req_to_token().alloc(),
                    second.memory().req_to_token().alloc(),
                    r.input_ids,
                    0,
                    {},
                    {}});
  bool decoded = false;
  for (int step = 0; step < 6; ++step) {
    ForwardBatch batch_a, batch_b;
    batch_a.mode = batch_b.mode = step == 0 ? ForwardMode::Extend : ForwardMode::Decode;
    for (Seq& q : seqs) {
      const int n = static_cast<int>(q.tokens.size()) - q.cached;
      ASSERT_TRUE(append_extend(batch_a, first.memory(), q.row_a, -1, q.tokens, q.cached, n));
      ASSERT_TRUE(append_extend(batch_b, second.memory(), q.row_b, -1, q.tokens, q.cached, n));
      q.cached += n;
    }
    const Tensor hidden = first.forward(batch_a);
    const Tensor logits = second.forward(batch_b, hidden);
    if (batch_b.mode == ForwardMode::Decode) {
      decoded = true;
      const auto& shape = backend->decode_partial_shape();
      ASSERT_EQ(shape.size(), 4u);
      EXPECT_EQ(shape[0], batch_b.batch_size());
      EXPECT_EQ(shape[1], config.num_attention_heads);
      EXPECT_GT(shape[2], 1);
      EXPECT_EQ(shape[3], second.kv_pool()->layout(3).v_head_dim);
    }
    for (size_t k = 0; k < seqs.size(); ++k) {
      const float* row = logits.row(static_cast<int64_t>(k));
      const int token = static_cast<int>(std::max_element(row, row + config.vocab_size) - row);
      seqs[k].tokens.push_back(token);
      seqs[k].output.push_back(token);
      seqs[k].logits.emplace_back(row, row + config.vocab_size);
    }
  }
  EXPECT_TRUE(decoded);
  for (size_t p = 0; p < requests.size(); ++p) {
    EXPECT_EQ(seqs[p].output, expected[p].output_ids) << "prompt " << p;
    for (size_t s = 0; s < seqs[p].logits.size(); ++s)
      EXPECT_LE(
          max_abs_diff(seqs[p].logits[s].data(), expected[p].logits[s].data(), config.vocab_size),
          1e-5);
  }
  for (const Seq& q : seqs) {
    first.memory().release(q.row_a, q.cached);
    second.memory().release(q.row_b, q.cached);
  }
}

namespace {

// Runs `strata generate` for the llama fixture; returns the exit code and seconds taken.
int run_failing(const std::string& args, std::string* err, double* seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string out;
  const int code = run_strata(
      "generate --model " + fixture_dir("llama") + " --max-new-tokens 4 " + args, &out, err);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return code;
}

void expect_error(const std::string& args, const std::string& message) {
  std::string err;
  double seconds = 0;
  EXPECT_EQ(run_failing(args, &err, &seconds), 1) << args;
  EXPECT_NE(err.find(message), std::string::npos) << args << "\n" << err;
}

}  // namespace

TEST(PipelineFailures, BadPartitionsAreOneClearError) {
  const std::string ids = "--input-ids 1,2,3 ";
  expect_error(ids + "--pp-size 5", "--pp-size 5 is larger than the model's 4 decoder layers");
  expect_error(ids + "--pp-layer-partition 1,2",
               "covers 3 layers but the model has 4 decoder layers");
  expect_error(ids + "--pp-size 2 --pp-layer-partition 1,1,2", "has 3 entries but --pp-size is 2");
  expect_error(ids + "--pp-layer-partition 2,x", "entry 1 ('x') is not a positive layer count");
  expect_error(ids + "--pp-size 2 --pp-timeout 0", "--pp-timeout must be a positive number");
  expect_error("--pp-size 2 --input-ids 1,999", "outside the vocabulary");
}

// GPU flags are checked before any stage process starts, without a GPU: one error each, and
// no stage ran (no "pipeline stage" in the message).
TEST(PipelineFailures, GpuFlagsAreOneClearError) {
  const std::string ids = "--input-ids 1,2,3 ";
  expect_error(ids + "--base-gpu-id -1", "--base-gpu-id must be at least 0, got -1");
  expect_error(ids + "--pp-size 2 --base-gpu-id 1",
               "--base-gpu-id 1 picks a GPU, but --device is cpu");
  std::string why;
  if (cuda_available(&why)) return;  // the rest is about machines without a usable GPU
  for (const std::string args :
       {"--device cuda --pp-size 2", "--device cuda --pp-size 2 --base-gpu-id 3"}) {
    std::string err;
    double seconds = 0;
    EXPECT_EQ(run_failing(ids + args, &err, &seconds), 1) << args;
    EXPECT_NE(err.find("--device cuda"), std::string::npos) << args << "\n" << err;
    EXPECT_EQ(err.find("pipeline stage"), std::string::npos) << args << "\n" << err;
  }
}

// A stage that dies, or hangs, ends the whole job: a clear error, every process gone, a
// non-zero exit, well within the bound the timeout sets.
TEST(PipelineFailures, DeadOrHungStageEndsTheJob) {
  for (const std::string fault : {"exit:1", "hang:1", "hang:2"}) {
    setenv("STRATA_PP_FAULT", fault.c_str(), 1);
    std::string err;
    double seconds = 0;
    const int code = run_failing("--input-ids 1,2,3 --pp-size 3 --pp-timeout 3", &err, &seconds);
    unsetenv("STRATA_PP_FAULT");
    EXPECT_NE(code, 0) << fault;
    EXPECT_LT(seconds, 60) << fault;
    EXPECT_NE(err.find("error: "), std::string::npos) << fault << "\n" << err;
    if (fault.rfind("hang", 0) == 0) {
      EXPECT_NE(err.find("hung or dead"), std::string::npos) << fault << "\n" << err;
    }
  }
}

}  // namespace strata::test

namespace strata::test {

// Started by hand under mpirun (as across machines), the job's size must match --pp-size.
TEST(PipelineFailures, JobSizeMustMatchPpSize) {
  const std::string err_path =
      std::filesystem::temp_directory_path() / ("strata_pp_np_" + std::to_string(::getpid()));
  const std::string cmd =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_btl_vader_single_copy_mechanism=none "
      "mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader " STRATA_BINARY
      " generate --model " +
      fixture_dir("llama") + " --input-ids 1,2,3 --pp-size 3 --pp-timeout 20 >/dev/null 2>" +
      err_path;
  const int status = std::system(cmd.c_str());
  std::ifstream in(err_path);
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(err_path);
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("this MPI job has 2 processes but --pp-size is 3"), std::string::npos) << err;
}

}  // namespace strata::test
