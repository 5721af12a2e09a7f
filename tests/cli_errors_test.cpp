// Bad input never crashes strata: each case gets one clear message and a non-zero exit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model/json_util.h"
#include "model/safetensors.h"
#include "test_util.h"

namespace strata::test {

namespace fs = std::filesystem;

namespace {

// A copy of the llama fixture that each test may break in one way.
class BrokenModel : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("strata_broken_" + std::to_string(::getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(fixture_dir("llama") + "/config.json", dir_ / "config.json");
    fs::copy_file(fixture_dir("llama") + "/model.safetensors", dir_ / "model.safetensors");
  }
  void TearDown() override { fs::remove_all(dir_); }

  json config() { return read_json_file((dir_ / "config.json").string()); }
  void write_config(const json& j) { std::ofstream(dir_ / "config.json") << j.dump(2); }

  // Rewrites model.safetensors through `edit(name, header entry)`; returning false drops it.
  template <typename Edit>
  void rewrite_weights(Edit edit) {
    SafetensorsFile src((dir_ / "model.safetensors").string());
    json header = json::object();
    std::string data;
    for (const auto& [name, info] : src.tensors()) {
      json entry = {{"dtype", dtype_name(info.dtype)}, {"shape", info.shape}};
      std::string bytes(reinterpret_cast<const char*>(info.data), info.nbytes);
      if (!edit(name, entry, bytes)) continue;
      entry["data_offsets"] = {data.size(), data.size() + bytes.size()};
      data += bytes;
      header[name] = entry;
    }
    const std::string h = header.dump();
    const uint64_t n = h.size();
    std::ofstream f(dir_ / "model.safetensors", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << h << data;
  }

  // Runs generate on the broken model; expects failure with `needle` in the message.
  void expect_error(const std::string& extra_args, const std::string& needle) {
    std::string out, err;
    const int code = run_strata(
        "generate --model " + dir_.string() + " --max-new-tokens 2 " + extra_args, &out, &err);
    EXPECT_NE(code, 0) << out;
    EXPECT_LT(code, 128) << "crashed: " << err;
    EXPECT_NE(err.find("error: "), std::string::npos) << err;
    EXPECT_NE(err.find(needle), std::string::npos) << "stderr was: " << err;
  }

  fs::path dir_;
};

}  // namespace

TEST_F(BrokenModel, WorkingCopyGenerates) {
  std::string out, err;
  EXPECT_EQ(run_strata("generate --model " + dir_.string() +
                           " --input-ids 1,2,3 --max-new-tokens 2 --json",
                       &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("output_ids"), std::string::npos);
}

TEST_F(BrokenModel, TruncatedSafetensors) {
  fs::resize_file(dir_ / "model.safetensors", fs::file_size(dir_ / "model.safetensors") / 2);
  expect_error("--input-ids 1,2,3", "truncated");
}

TEST_F(BrokenModel, MissingTensor) {
  rewrite_weights([](const std::string& name, json&, std::string&) {
    return name != "model.layers.2.mlp.up_proj.weight";
  });
  expect_error("--input-ids 1,2,3", "missing tensor 'model.layers.2.mlp.up_proj.weight'");
}

TEST_F(BrokenModel, TensorOfWrongShape) {
  rewrite_weights([](const std::string& name, json& e, std::string&) {
    if (name == "model.norm.weight") e["shape"] = {64, 2};
    return true;
  });
  expect_error("--input-ids 1,2,3", "has shape [64, 2] but the config implies [128]");
}

TEST_F(BrokenModel, TensorOfWrongDtype) {
  rewrite_weights([](const std::string& name, json& e, std::string&) {
    if (name == "model.norm.weight") e["dtype"] = "I32";
    return true;
  });
  expect_error("--input-ids 1,2,3", "dtype I32");
}

TEST_F(BrokenModel, ConfigMissingRequiredField) {
  json c = config();
  c.erase("num_hidden_layers");
  write_config(c);
  expect_error("--input-ids 1,2,3", "missing required field 'num_hidden_layers'");
}

TEST_F(BrokenModel, UnknownArchitecture) {
  json c = config();
  c["architectures"] = {"FancyNewForCausalLM"};
  write_config(c);
  expect_error("--input-ids 1,2,3", "unknown architecture 'FancyNewForCausalLM'");
}

TEST_F(BrokenModel, ConfigThatIsNotJson) {
  std::ofstream(dir_ / "config.json") << "{\"vocab_size\": 12,";
  expect_error("--input-ids 1,2,3", "not valid JSON");
}

TEST_F(BrokenModel, BadRequests) {
  expect_error("--input-ids 1,2,3 --page-size 0", "--page-size must be at least 1");
  expect_error("--input-ids 1,512,3", "input id 512 at position 1 is outside the vocabulary");
  expect_error("--input-ids 1,-4", "outside the vocabulary");
  expect_error("--input-ids ,", "prompt 0 is empty");
  expect_error("--input-ids 1,x,3", "'x' is not a token id");
  expect_error("--input-ids 1,2 --max-new-tokens 5000", "exceed the context length");
  expect_error("--input-ids 1,2 --temperature -1", "temperature must be >= 0");
  expect_error("--input-ids 1,2 --load-format pickle", "unknown --load-format 'pickle'");
}

TEST_F(BrokenModel, EmptyPromptLineInFile) {
  std::ofstream(dir_ / "prompts.txt") << "1,2,3\n,\n";
  expect_error("--input-ids-file " + (dir_ / "prompts.txt").string(), "prompt 1 is empty");
}

TEST(CliErrors, NonExistentModelDirectory) {
  std::string out, err;
  EXPECT_EQ(run_strata("generate --model /no/such/model --input-ids 1", &out, &err), 1);
  EXPECT_NE(err.find("model directory '/no/such/model' does not exist"), std::string::npos) << err;
}

TEST(CliErrors, DirectoryWithoutWeightsSuggestsDummy) {
  std::string out, err;
  const auto dir = fs::temp_directory_path() / ("strata_noweights_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fixture_dir("llama") + "/config.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  EXPECT_EQ(run_strata("generate --model " + dir.string() + " --input-ids 1", &out, &err), 1);
  EXPECT_NE(err.find("--load-format dummy"), std::string::npos) << err;
  EXPECT_EQ(run_strata("generate --model " + dir.string() +
                           " --input-ids 1 --load-format dummy --max-new-tokens 3 --json",
                       &out, &err),
            0)
      << err;
  fs::remove_all(dir);
}

TEST(CliErrors, UnknownFlagAndMissingSubcommand) {
  std::string out, err;
  EXPECT_EQ(run_strata("generate --model x --no-such-flag 3", &out, &err), 2);
  EXPECT_NE(err.find("--no-such-flag"), std::string::npos) << err;
  EXPECT_NE(run_strata("", &out, &err), 0);
  EXPECT_EQ(run_strata("--help", &out, &err), 0);
  EXPECT_NE(out.find("generate"), std::string::npos);
  EXPECT_NE(out.find("bench-one-batch"), std::string::npos);
}

TEST(CliGenerate, InputIdsFileRunsAsOneBatchAndMatchesSingles) {
  const auto ref = load_reference("llama");
  const auto path = fs::temp_directory_path() / ("strata_prompts_" + std::to_string(::getpid()));
  {
    std::ofstream f(path);
    for (const auto& ids : ref.input_ids) {
      for (size_t i = 0; i < ids.size(); ++i) f << (i ? "," : "") << ids[i];
      f << "\n";
    }
  }
  std::string out, err;
  ASSERT_EQ(
      run_strata("generate --model " + fixture_dir("llama") + " --input-ids-file " + path.string() +
                     " --max-new-tokens 10 --temperature 0 --json --page-size 16",
                 &out, &err),
      0)
      << err;
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  for (; std::getline(lines, line); ++i) {
    const json j = json::parse(line);
    ASSERT_LT(i, ref.greedy_ids.size());
    EXPECT_EQ(j["output_ids"].get<std::vector<int>>(), ref.greedy_ids[i]) << "prompt " << i;
  }
  EXPECT_EQ(i, ref.greedy_ids.size());
  fs::remove(path);
}

}  // namespace strata::test
