// The startup log of the commands that load a model, at --log-level info on stderr: the load's
// progress and end, the configuration, and the memory plan (DESIGN.md: a server that is
// silent while 16 GB load, or that does not say what it sized, leaves its operator guessing).
#include <gtest/gtest.h>

#include "test_util.h"

namespace strata::test {
namespace {

std::string generate_stderr(const std::string& model, const std::string& extra) {
  std::string out, err;
  EXPECT_EQ(
      run_strata("generate --model " + model + " --input-ids 1,2,3 --max-new-tokens 1 " + extra,
                 &out, &err),
      0)
      << err;
  return err;
}

void expect_has(const std::string& err, const std::string& needle) {
  EXPECT_NE(err.find(needle), std::string::npos) << "no '" << needle << "' in:\n" << err;
}

TEST(CliLog, CheckpointLoadConfigurationAndMemoryPlanAtInfo) {
  const std::string err = generate_stderr(fixture_dir("llama"), "--log-level info");
  // The checkpoint's size is known, so the end says it all arrived.
  expect_has(err, "INFO loaded weights (layers [0, 4) of 4): 100% of ");
  expect_has(err, " tensors on the device, ");
  expect_has(err, "B/s");  // the rate, in whatever unit fits
  expect_has(err,
             "configuration: model " + fixture_dir("llama") + ", LlamaForCausalLM, device cpu");
  expect_has(err,
             "weights F32, KV cache F32, page size 1, context length 1024, max running "
             "requests ");
  expect_has(err, ", pp 1 (this stage: layers [0, 4) of 4), tp 1");
  expect_has(err, "memory plan: weights ");
  expect_has(err, "; 4 layers of 2 kv heads, k 32 wide, v 32 wide, F32: 2048 B/token, ");
  expect_has(err, "host memory available ");
}

TEST(CliLog, DummyWeightsAndStatePoolAndQuietBelowInfo) {
  // Dummy weights have no whole to count to: bytes, tensors and rate only.
  const std::string dummy =
      generate_stderr(fixture_dir("nemotron_h"), "--load-format dummy --log-level info");
  expect_has(dummy, "INFO loaded weights (layers [0, ");
  EXPECT_EQ(dummy.find("% of "), std::string::npos) << dummy;
  expect_has(dummy, ", state pool ");  // a hybrid model's recurrent-state slots
  const std::string quiet = generate_stderr(fixture_dir("llama"), "--log-level warning");
  EXPECT_EQ(quiet.find("loaded weights"), std::string::npos) << quiet;
  EXPECT_EQ(quiet.find("memory plan"), std::string::npos) << quiet;
  std::string out, err;
  EXPECT_EQ(
      run_strata("generate --model " + fixture_dir("llama") + " --input-ids 1 --log-level loud",
                 &out, &err),
      1);
  expect_has(err, "error: --log-level must be one of debug, info, warning, error; got 'loud'");
}

}  // namespace
}  // namespace strata::test
