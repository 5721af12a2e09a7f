// A real client: the official `openai` npm package (tests/node, installed by scripts/setup.sh
// with `npm ci`) drives completions and chat completions, streamed and not, against
// `strata serve` on loopback with the tiny Llama and the tiny ChatML tokenizer. Skips, saying
// why, only where node or tests/node/node_modules are missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "server_harness.h"
#include "test_util.h"

namespace strata {
namespace {

TEST(OpenAiClient, DrivesCompletionsAndChatStreamedAndNot) {
  namespace fs = std::filesystem;
  const std::string dir = STRATA_NODE_TESTS;
  if (std::system("command -v node >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "node is not installed, so the OpenAI client test cannot run; install "
                    "Node.js (scripts/setup.sh does)";
  if (!fs::exists(fs::path(dir) / "node_modules" / "openai" / "package.json"))
    GTEST_SKIP() << dir << "/node_modules has no openai package, so the OpenAI client test "
                 << "cannot run; install it with `npm ci --prefix " << dir
                 << "` (scripts/setup.sh does)";

  constexpr int kTokens = 12;
  const json completion = test::generate_text("llama", "--prompt", "The quick brown fox", kTokens);
  const json chat = test::generate_text("llama", "--chat", "Hello! Who are you?", kTokens);
  ASSERT_TRUE(completion.is_object() && chat.is_object());
  const json expected = {{"model", "tiny-llama"},
                         {"api_key", "strata-test-key"},
                         {"max_tokens", kTokens},
                         {"prompt", "The quick brown fox"},
                         {"completion", completion["text"]},
                         {"message", "Hello! Who are you?"},
                         {"chat", chat["text"]}};
  const fs::path expected_file =
      fs::temp_directory_path() / ("strata_openai_" + std::to_string(getpid()) + ".json");
  std::ofstream(expected_file) << expected.dump();

  test::ServeProcess serve("--model " + test::fixture_dir("llama") + " --tokenizer-path " +
                           test::tiny_tokenizer_dir() +
                           " --served-model-name tiny-llama --threads 2 --context-length 256"
                           " --api-key strata-test-key --tool-call-parser hermes");
  const int port = serve.port();
  ASSERT_GT(port, 0) << serve.log();
  std::string out, err;
  const int rc = test::run_command("node " + dir + "/openai_client.mjs http://127.0.0.1:" +
                                       std::to_string(port) + " " + expected_file.string(),
                                   &out, &err);
  fs::remove(expected_file);
  EXPECT_EQ(rc, 0) << out << err;
  EXPECT_NE(out.find(" checks passed"), std::string::npos) << out << err;
  std::cout << out;
  EXPECT_EQ(serve.stop(), 0) << serve.log();
}

}  // namespace
}  // namespace strata
