// Bad configs, bad checkpoints and bad flags, as a table: each case breaks a copy of the llama
// fixture (or a flag) in one way and runs the real binary. Every case must end with exactly one
// `error:` line that contains the expected words (the field or flag, the value, the allowed
// range), a non-zero exit that is not a crash, within 2 s and within 200 MB of peak RSS above a
// baseline of `strata --help` (the CUDA libraries alone make that baseline ~230 MB). Both limits
// are what "checked before memory is sized or weights are read" means, measured.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "model/json_util.h"
#include "model/safetensors.h"
#include "test_util.h"

namespace strata::test {

namespace fs = std::filesystem;

namespace {

struct RunResult {
  int code = 0;
  std::string err;
  double seconds = 0;
  long peak_rss_kb = 0;
};

// Runs the strata binary directly (no shell, so the child's peak RSS is strata's own).
RunResult run_measured(const std::vector<std::string>& args) {
  const std::string err_path = scratch_dir() + "/table_case.err";
  std::vector<std::string> argv_s = {STRATA_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_WRONLY);
    const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(null_fd, 1);
    dup2(err_fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  RunResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_rss_kb = usage.ru_maxrss;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream f(err_path);
  std::stringstream ss;
  ss << f.rdbuf();
  r.err = ss.str();
  return r;
}

std::vector<std::string> split_args(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string a; in >> a;) out.push_back(a);
  return out;
}

// A model directory the case may break: a copy of the llama fixture.
class CaseDir {
 public:
  explicit CaseDir(const std::string& name) : dir_(fs::path(scratch_dir()) / ("table_" + name)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(fixture_dir("llama") + "/config.json", dir_ / "config.json");
    fs::copy_file(fixture_dir("llama") + "/model.safetensors", dir_ / "model.safetensors");
  }
  ~CaseDir() { fs::remove_all(dir_); }
  std::string path() const { return dir_.string(); }

  void edit_config(const std::function<void(json&)>& edit) const {
    json c = read_json_file((dir_ / "config.json").string());
    edit(c);
    std::ofstream(dir_ / "config.json") << c.dump(2);
  }

  // Rewrites model.safetensors: `edit` sees the header (entries with their data_offsets laid
  // out in order) and the data bytes, and may change either; `extra` is appended to the header
  // text verbatim before its closing brace (for what a JSON object cannot hold, e.g. a
  // duplicate key).
  void edit_weights(const std::function<void(json& header, std::string& data)>& edit,
                    const std::string& extra = "") const {
    json header = json::object();
    std::string data;
    {
      SafetensorsFile src((dir_ / "model.safetensors").string());
      for (const auto& [name, info] : src.tensors()) {
        header[name] = {{"dtype", dtype_name(info.dtype)},
                        {"shape", info.shape},
                        {"data_offsets", {data.size(), data.size() + info.nbytes}}};
        data.append(reinterpret_cast<const char*>(info.data), info.nbytes);
      }
    }
    edit(header, data);
    std::string text = header.dump();
    if (!extra.empty()) text.insert(text.size() - 1, "," + extra);
    const uint64_t n = text.size();
    std::ofstream f(dir_ / "model.safetensors", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << text << data;
  }

  void write_file(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
  }

 private:
  fs::path dir_;
};

struct BadInput {
  const char* category;  // config | checkpoint | flag
  const char* name;
  std::function<void(const CaseDir&)> setup;  // may be empty
  // The command line; {dir} stands for the case's model directory.
  std::string args;
  std::vector<std::string> expected;  // each must appear in the error line
};

const char* kGenerate = "generate --model {dir} --input-ids 1,2,3 --max-new-tokens 2";
const char* kServe = "serve --model {dir} --port 0";

std::function<void(const CaseDir&)> config_edit(std::function<void(json&)> edit) {
  return [edit](const CaseDir& d) { d.edit_config(edit); };
}

std::function<void(const CaseDir&)> weights_edit(std::function<void(json&, std::string&)> edit,
                                                 std::string extra = "") {
  return [edit, extra](const CaseDir& d) { d.edit_weights(edit, extra); };
}

void set_float(std::string& data, const json& entry, int64_t element, float value) {
  const auto begin = entry["data_offsets"][0].get<size_t>();
  std::memcpy(data.data() + begin + element * sizeof(float), &value, sizeof(float));
}

std::vector<BadInput> bad_inputs() {
  const std::string gen = kGenerate;
  const std::string serve = kServe;
  return {
      // config.json: sizes
      {"config",
       "LayersHuge",
       config_edit([](json& c) { c["num_hidden_layers"] = 1000000000; }),
       gen,
       {"'num_hidden_layers'", "1000000000", "1..4096"}},
      {"config",
       "LayersNegative",
       config_edit([](json& c) { c["num_hidden_layers"] = -3; }),
       gen,
       {"'num_hidden_layers'", "-3", "must be positive"}},
      {"config",
       "VocabBeyondInt",
       config_edit([](json& c) { c["vocab_size"] = 1ll << 40; }),
       gen,
       {"'vocab_size'", "1099511627776", "outside the range"}},
      {"config",
       "VocabHuge",
       config_edit([](json& c) { c["vocab_size"] = 1 << 30; }),
       gen,
       {"'vocab_size'", "1073741824", "1..16777216"}},
      {"config",
       "HiddenNotInteger",
       config_edit([](json& c) { c["hidden_size"] = "x"; }),
       gen,
       {"'hidden_size'", "should be an integer", "\"x\""}},
      {"config",
       "HiddenFractional",
       config_edit([](json& c) { c["hidden_size"] = 127.5; }),
       gen,
       {"'hidden_size'", "should be an integer", "127.5"}},
      {"config",
       "IntermediateBeyondInt",
       config_edit([](json& c) { c["intermediate_size"] = 1ll << 31; }),
       gen,
       {"'intermediate_size'", "2147483648", "outside the range"}},
      {"config",
       "HeadsHuge",
       config_edit([](json& c) { c["num_attention_heads"] = 100000; }),
       gen,
       {"'num_attention_heads'", "100000", "0..4096"}},
      {"config",
       "MaxPositionsNegative",
       config_edit([](json& c) { c["max_position_embeddings"] = -1; }),
       gen,
       {"'max_position_embeddings'", "-1", "must be positive"}},
      // config.json: numeric ranges
      {"config",
       "RopeThetaZero",
       config_edit([](json& c) { c["rope_parameters"]["rope_theta"] = 0; }),
       gen,
       {"'rope_theta'", "is 0", "> 0"}},
      {"config",
       "RopeThetaNegative",
       config_edit([](json& c) { c["rope_parameters"]["rope_theta"] = -5.0; }),
       gen,
       {"'rope_theta'", "-5", "> 0"}},
      {"config",
       "RopeThetaNaN",
       config_edit([](json& c) {
         c["rope_parameters"]["rope_theta"] = {{"__float__", "NaN"}};
       }),
       gen,
       {"'rope_theta'", "nan", "finite"}},
      {"config",
       "NormEpsNegative",
       config_edit([](json& c) { c["rms_norm_eps"] = -1e-5; }),
       gen,
       {"'rms_norm_eps'", "-1e-05", ">= 0"}},
      {"config",
       "RopeFactorZero",
       config_edit([](json& c) {
         c["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "linear"}, {"factor", 0}};
       }),
       gen,
       {"'factor (rope scaling)'", "is 0", "> 0"}},
      {"config",
       "PartialRotaryZero",
       config_edit([](json& c) { c["partial_rotary_factor"] = 0; }),
       gen,
       {"'partial_rotary_factor'", "is 0", "(0, 1]"}},
      {"config",
       "PartialRotaryAboveOne",
       config_edit([](json& c) { c["partial_rotary_factor"] = 1.5; }),
       gen,
       {"'partial_rotary_factor'", "1.5", "(0, 1]"}},
      // config.json: mistyped fields that used to fall back to defaults or throw bare json errors
      {"config",
       "RopeParametersString",
       config_edit([](json& c) { c["rope_parameters"] = "x"; }),
       gen,
       {"'rope_parameters'", "should be an object", "\"x\""}},
      {"config",
       "MlpMultipliersString",
       config_edit([](json& c) { c["mlp_multipliers"] = "x"; }),
       gen,
       {"'mlp_multipliers'", "list of finite numbers", "\"x\""}},
      {"config",
       "TimeStepLimitString",
       config_edit([](json& c) { c["time_step_limit"] = "x"; }),
       gen,
       {"'time_step_limit'", "list of numbers", "\"x\""}},
      {"config",
       "TimeStepLimitThree",
       config_edit([](json& c) {
         c["time_step_limit"] = {0.0, 1.0, 2.0};
       }),
       gen,
       {"'time_step_limit'", "[min, max]"}},
      {"config",
       "TieEmbeddingsString",
       config_edit([](json& c) { c["tie_word_embeddings"] = "yes"; }),
       gen,
       {"'tie_word_embeddings'", "true or false", "\"yes\""}},
      {"config",
       "ModelTypeNumber",
       config_edit([](json& c) { c["model_type"] = 5; }),
       gen,
       {"'model_type'", "should be a string", "5"}},
      {"config",
       "EosString",
       config_edit([](json& c) { c["eos_token_id"] = "x"; }),
       gen,
       {"'eos_token_id'", "integer or a list of integers"}},
      {"config",
       "EosPastIntMax",
       config_edit([](json& c) {
         c["eos_token_id"] = json::array({2, int64_t{1} << 32});
       }),
       gen,
       {"eos_token_id", "4294967296", "0..2147483647"}},
      {"config",
       "EosNegative",
       config_edit([](json& c) { c["eos_token_id"] = -1; }),
       gen,
       {"eos_token_id", "-1", "0..2147483647"}},
      {"config",
       "NormEpsString",
       config_edit([](json& c) { c["rms_norm_eps"] = "small"; }),
       gen,
       {"'rms_norm_eps'", "should be a number", "config.json"}},
      // checkpoints
      {"checkpoint",
       "ShapeOverflowsInt64",
       weights_edit([](json& h, std::string&) {
         h["model.norm.weight"]["shape"] = {8589934592ll, 2147483648ll};
       }),
       gen,
       {"'model.norm.weight'", "[8589934592,2147483648]", "overflows 64 bits"}},
      {"checkpoint",
       "OffsetsOverlap",
       weights_edit([](json& h, std::string&) {
         h["model.norm.weight"]["data_offsets"] =
             h["model.layers.0.input_layernorm.weight"]["data_offsets"];
       }),
       gen,
       {"overlap", "model.norm.weight"}},
      {"checkpoint",
       "OffsetMisaligned",
       weights_edit([](json& h, std::string& data) {
         // Two bytes later: inside the data (4 bytes appended), but not on a float boundary.
         data.append(4, '\0');
         const auto begin = h["model.norm.weight"]["data_offsets"][0].get<size_t>();
         const auto end = h["model.norm.weight"]["data_offsets"][1].get<size_t>();
         h["model.norm.weight"]["data_offsets"] = {begin + 2, end + 2};
       }),
       gen,
       {"'model.norm.weight'", "not a multiple of its 4-byte F32"}},
      {"checkpoint",
       "OffsetsBackwards",
       weights_edit([](json& h, std::string&) {
         h["model.norm.weight"]["data_offsets"] = {512, 0};
       }),
       gen,
       {"'model.norm.weight'", "run backwards"}},
      {"checkpoint",
       "NegativeDimension",
       weights_edit([](json& h, std::string&) { h["model.norm.weight"]["shape"] = {-128}; }),
       gen,
       {"'model.norm.weight'", "invalid shape", "[-128]"}},
      {"checkpoint",
       "DuplicateKey",
       weights_edit(
           [](json&, std::string&) {},
           R"("model.norm.weight": {"dtype": "F32", "shape": [128], "data_offsets": [0, 512]})"),
       gen,
       {"names tensor 'model.norm.weight' twice"}},
      {"checkpoint",
       "HeaderNestedDeep",
       weights_edit([](json& h, std::string&) {
         json deep = json::array();
         for (int i = 0; i < 50; ++i) deep = json::array({deep});
         h["__metadata__"] = {{"x", deep}};
       }),
       gen,
       {"nests deeper than 4 levels"}},
      {"checkpoint",
       "NaNWeight",
       weights_edit([](json& h, std::string& data) {
         set_float(data, h["model.norm.weight"], 3, std::nanf(""));
       }),
       gen,
       {"'model.norm.weight'", "nan at element 3", "corrupt"}},
      {"checkpoint",
       "InfWeight",
       weights_edit([](json& h, std::string& data) {
         set_float(data, h["model.layers.1.mlp.down_proj.weight"], 0, INFINITY);
       }),
       gen,
       {"'model.layers.1.mlp.down_proj.weight'", "inf at element 0"}},
      {"checkpoint",
       "ShardEscapesDirectory",
       [](const CaseDir& d) {
         d.write_file("model.safetensors.index.json",
                      R"({"weight_map": {"model.norm.weight": "../elsewhere/model.safetensors"}})");
       },
       gen,
       {"'../elsewhere/model.safetensors'", "outside the model directory"}},
      {"checkpoint",
       "ShardAbsolutePath",
       [](const CaseDir& d) {
         d.write_file("model.safetensors.index.json",
                      R"({"weight_map": {"model.norm.weight": "/etc/passwd"}})");
       },
       gen,
       {"'/etc/passwd'", "outside the model directory"}},
      // flags of generate
      {"flag",
       "MaxNewTokensTenMillion",
       {},
       "generate --model {dir} --input-ids 1,2,3 --max-new-tokens 10000000",
       {"10000000 new tokens", "exceed the context length 1024"}},
      {"flag",
       "MaxNewTokensBillion",
       {},
       "generate --model {dir} --input-ids 1,2,3 --max-new-tokens 1000000000",
       {"1000000000 new tokens", "exceed the context length 1024"}},
      {"flag",
       "MaxNewTokensNegative",
       {},
       "generate --model {dir} --input-ids 1,2,3 --max-new-tokens -4",
       {"max_new_tokens must be >= 0", "-4"}},
      {"flag",
       "ThreadsHundredThousand",
       {},
       gen + " --threads 100000",
       {"--threads must be in 0..1024", "100000"}},
      {"flag",
       "ThreadsFortyThousand",
       {},
       gen + " --threads 40000",
       {"--threads must be in 0..1024", "40000"}},
      {"flag",
       "ThreadsNegative",
       {},
       gen + " --threads -1",
       {"--threads must be in 0..1024", "-1"}},
      {"flag", "PpSizeZero", {}, gen + " --pp-size 0", {"--pp-size must be in 1..256", "got 0"}},
      {"flag", "PpSizeHuge", {}, gen + " --pp-size 100000", {"--pp-size must be in 1..256"}},
      {"flag",
       "PpTimeoutNegative",
       {},
       gen + " --pp-timeout -1",
       {"--pp-timeout must be a positive number of seconds", "-1"}},
      {"flag",
       "ChunkedPrefillNegative",
       {},
       gen + " --chunked-prefill-size -5",
       {"--chunked-prefill-size must be >= 0", "-5"}},
      {"flag",
       "MicroBatchesZero",
       {},
       gen + " --micro-batches 0",
       {"--micro-batches must be at least 1", "got 0"}},
      {"flag",
       "MemFractionNegative",
       {},
       gen + " --mem-fraction-static -1",
       {"--mem-fraction-static must be in (0, 1]", "-1"}},
      {"flag",
       "ContextBeyondPositions",
       {},
       gen + " --context-length 5000",
       {"--context-length 5000", "max_position_embeddings 1024", "at most 1024"}},
      {"flag",
       "ContextNegative",
       {},
       gen + " --context-length -2",
       {"--context-length must be positive", "-2"}},
      {"flag",
       "MaxTotalTokensNegative",
       {},
       gen + " --max-total-tokens -1",
       {"--max-total-tokens must be positive", "-1"}},
      {"flag", "PageSizeZero", {}, gen + " --page-size 0", {"--page-size must be at least 1", "0"}},
      {"flag", "TopPAboveOne", {}, gen + " --top-p 1.5", {"top_p", "1.5"}},
      // flags of serve (checked before the port is bound and weights load)
      {"flag",
       "ServePpSizeOverLayers",
       {},
       serve + " --pp-size 9",
       {"--pp-size 9 is larger than the model's 4 decoder layers", "--pp-size 4 or less"}},
      {"flag",
       "ServePpPartitionSum",
       {},
       serve + " --pp-layer-partition 2,3",
       {"--pp-layer-partition 2,3 covers 5 layers", "must sum to 4"}},
      {"flag",
       "ServeChunkedPrefillNegative",
       {},
       serve + " --chunked-prefill-size -5",
       {"--chunked-prefill-size must be positive, or -1", "-5"}},
      {"flag",
       "ServeMemFraction",
       {},
       serve + " --mem-fraction-static 2",
       {"--mem-fraction-static must be in (0, 1]", "2"}},
      {"flag",
       "ServeContextBeyondPositions",
       {},
       serve + " --context-length 100000",
       {"--context-length 100000", "max_position_embeddings 1024"}},
      {"flag",
       "ServeThreadsNegative",
       {},
       serve + " --threads -1",
       {"--threads must be in 0..1024", "-1"}},
      {"flag",
       "ServeMaxRunningZero",
       {},
       serve + " --max-running-requests 0",
       {"--max-running-requests must be at least 1", "0"}},
      {"flag", "ServePortNegative", {}, serve + " --port -5", {"--port must be in 0..65535", "-5"}},
      // SGLang flags strata takes only at its own value: refused, naming what it does instead
      {"flag", "ServeDtype", {}, serve + " --dtype float16", {"--dtype float16", "auto"}},
      {"flag",
       "ServeQuantization",
       {},
       serve + " --quantization fp8",
       {"--quantization 'fp8' is unknown", "int8, w8a8_int8"}},
      {"flag",
       "ServeKvDtype",
       {},
       serve + " --kv-cache-dtype fp8_e5m2",
       {"fp8_e5m2", "bf16 on cuda"}},
      {"flag",
       "ServePolicy",
       {},
       serve + " --schedule-policy lpm",
       {"--schedule-policy lpm", "fcfs"}},
      {"flag", "ServeStreamInterval", {}, serve + " --stream-interval 4", {"--stream-interval 4"}},
      {"flag",
       "ServeMaxPrefill",
       {},
       serve + " --max-prefill-tokens 4096",
       {"--max-prefill-tokens 4096", "--chunked-prefill-size"}},
      {"flag", "ServeRevision", {}, serve + " --revision main", {"--revision main", "local"}},
      {"flag", "ServeReasoningParser", {}, serve + " --reasoning-parser glm45", {"glm45", "qwen3"}},
      {"flag",
       "ServeSamplingDefaults",
       {},
       serve + " --sampling-defaults x",
       {"--sampling-defaults", "openai"}},
      {"flag",
       "BenchThreadsHuge",
       {},
       "bench-one-batch --model {dir} --load-format dummy --batch-size 1 --input-len 4 "
       "--output-len 2 --threads 100000",
       {"--threads must be in 0..1024", "100000"}},
  };
}

std::string expand(std::string args, const std::string& dir) {
  for (size_t at; (at = args.find("{dir}")) != std::string::npos;) args.replace(at, 5, dir);
  return args;
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

constexpr double kMaxSeconds = 2.0;
constexpr long kMaxRssGrowthKb = 200 * 1024;

}  // namespace

TEST(BadInputTable, EveryCaseFailsFastWithOneErrorLineNamingTheProblem) {
  const RunResult baseline = run_measured({"--help"});
  ASSERT_EQ(baseline.code, 0) << baseline.err;
  std::map<std::string, int> per_category;
  double slowest = 0;
  long largest_growth = 0;
  for (const BadInput& c : bad_inputs()) {
    SCOPED_TRACE(std::string(c.category) + "/" + c.name);
    CaseDir dir(c.name);
    if (c.setup) c.setup(dir);
    const RunResult r = run_measured(split_args(expand(c.args, dir.path())));
    EXPECT_NE(r.code, 0) << r.err;
    EXPECT_LT(r.code, 128) << "crashed: " << r.err;
    EXPECT_EQ(count_of(r.err, "error: "), 1) << r.err;
    for (const auto& word : c.expected)
      EXPECT_NE(r.err.find(word), std::string::npos) << "missing '" << word << "' in: " << r.err;
    EXPECT_LT(r.seconds, kMaxSeconds) << r.err;
    const long growth = r.peak_rss_kb - baseline.peak_rss_kb;
    EXPECT_LT(growth, kMaxRssGrowthKb) << "peak RSS " << r.peak_rss_kb << " kB";
    ++per_category[c.category];
    slowest = std::max(slowest, r.seconds);
    largest_growth = std::max(largest_growth, growth);
  }
  // The figures docs/reliability.md quotes.
  std::string counts;
  for (const auto& [category, n] : per_category) counts += fmt::format(" {}={}", category, n);
  std::printf("bad inputs:%s; slowest %.2f s; baseline RSS %ld kB, largest growth %ld kB\n",
              counts.c_str(), slowest, baseline.peak_rss_kb, largest_growth);
}

}  // namespace strata::test
