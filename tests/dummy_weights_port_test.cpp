// bench/llamacpp/strata_dummy.mjs recomputes --load-format dummy's values in JavaScript so that
// the GGUF files llama.cpp benchmarks on hold strata's weights (bench/cpu_vs_llamacpp.sh). This
// test ties that port to the one definition in src/core/dummy_random.h: both must give the same
// float32 bits for the same (seed, tensor name, index), one at a time and over a long run of
// consecutive indices (the port steps its 64-bit counter in 32-bit halves). Skips only where
// node is missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/dummy_random.h"
#include "test_util.h"

namespace strata {
namespace {

uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(DummyWeightsJsPort, GivesTheCppGeneratorsValues) {
  namespace fs = std::filesystem;
  if (std::system("command -v node >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "node is not installed, so the JavaScript port cannot be run; install "
                    "Node.js (scripts/setup.sh does)";
  const fs::path port =
      fs::path(STRATA_TEST_DATA).parent_path().parent_path() / "bench/llamacpp/strata_dummy.mjs";
  ASSERT_TRUE(fs::exists(port)) << port;

  struct Case {
    uint64_t seed;
    const char* name;
    uint64_t first;  // then kRun consecutive indices
  };
  const Case cases[] = {{0, "model.embed_tokens.weight", 0},
                        {0, "model.layers.15.mlp.down_proj.weight", 11534335},
                        {3, "lm_head.weight", 65535000},
                        {123456789, "model.layers.0.self_attn.q_proj.weight", 4294967290}};
  constexpr int kRun = 5000;
  // The port prints, per case, the bits of its kRun values.
  std::ostringstream script;
  script << "import {dummyStream, fillDummy} from 'file://" << port.string() << "';\n"
         << "for (const [seed, name, first] of [";
  for (const Case& c : cases)
    script << "[" << c.seed << "n, '" << c.name << "', " << c.first << "],";
  script << "]) {\n  const v = new Float32Array(" << kRun << ");\n"
         << "  fillDummy(v, dummyStream(seed, name), first, 0.02);\n"
         << "  console.log(Array.from(new Uint32Array(v.buffer)).join(' '));\n}\n";
  const fs::path script_file = fs::path(test::scratch_dir()) / "dummy_port.mjs";
  std::ofstream(script_file) << script.str();
  std::string out, err;
  const int rc = test::run_command("node " + script_file.string(), &out, &err);
  ASSERT_EQ(rc, 0) << err;

  std::istringstream lines(out);
  for (const Case& c : cases) {
    const uint64_t stream = dummy_stream(c.seed, c.name);
    int mismatches = 0;
    for (int k = 0; k < kRun; ++k) {
      uint32_t js = 0;
      ASSERT_TRUE(lines >> js) << c.name << ": the port printed fewer than " << kRun << " values";
      const float cpp = dummy_value(stream, c.first + k, 0.02f);
      if (js != float_bits(cpp) && ++mismatches <= 3)
        ADD_FAILURE() << c.name << " (seed " << c.seed << ") index " << c.first + k << ": C++ "
                      << cpp << " (bits " << float_bits(cpp) << "), JavaScript bits " << js;
    }
    EXPECT_EQ(mismatches, 0) << c.name;
  }
}

}  // namespace
}  // namespace strata
