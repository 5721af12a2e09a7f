// strata tokenize: encode text with a Hugging Face tokenizer (tokenizer.json) and decode the
// ids back; or, with --bench, measure single-thread encode throughput on a text file.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

namespace {

struct TokenizeFlags {
  std::string tokenizer;
  std::string text;
  bool has_text = false;
  std::string jsonl;
  std::string bench;
  double bench_seconds = 3.0;
  bool bench_lines = false;
  bool json = false;
  bool add_special_tokens = false;
  bool skip_special_tokens = false;
};

void print_result(const tok::Tokenizer& t, const std::string& text, const TokenizeFlags& f) {
  const std::vector<int> ids = t.encode(text, f.add_special_tokens);
  const std::string decoded = t.decode(ids, f.skip_special_tokens);
  if (f.json) {
    nlohmann::json j;
    j["ids"] = ids;
    j["text"] = decoded;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? "," : "") << ids[i];
  std::cout << "\n" << decoded << "\n";
}

// The inputs of one benchmark pass: the whole file as one string, or with --bench-lines each
// line (without its newline) as its own input, the size of the prompts a server sees.
std::vector<std::string> bench_inputs(const std::string& text, bool per_line) {
  if (!per_line) return {text};
  std::vector<std::string> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (end > pos) lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

size_t encode_all(const tok::Tokenizer& t, const std::vector<std::string>& inputs) {
  size_t tokens = 0;
  for (const auto& input : inputs) tokens += t.encode(input, false).size();
  return tokens;
}

// Encodes the inputs repeatedly for at least `seconds` and reports MB/s (one thread; the
// first pass warms the piece cache, as a server's would be).
int run_bench(const tok::Tokenizer& t, const TokenizeFlags& f) {
  std::ifstream in(f.bench, std::ios::binary);
  if (!in) fail("cannot read --bench file {}", f.bench);
  std::ostringstream s;
  s << in.rdbuf();
  const std::vector<std::string> inputs = bench_inputs(s.str(), f.bench_lines);
  size_t bytes = 0;
  for (const auto& input : inputs) bytes += input.size();
  if (bytes == 0) fail("--bench file {} is empty", f.bench);
  size_t tokens = encode_all(t, inputs);
  const auto start = std::chrono::steady_clock::now();
  int passes = 0;
  double elapsed = 0;
  while (elapsed < f.bench_seconds || passes == 0) {
    tokens = encode_all(t, inputs);
    ++passes;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double mb = static_cast<double>(bytes) * passes / 1e6;
  nlohmann::json j;
  j["inputs"] = inputs.size();
  j["bytes"] = bytes;
  j["tokens"] = tokens;
  j["passes"] = passes;
  j["seconds"] = elapsed;
  j["mb_per_s"] = mb / elapsed;
  j["tokens_per_s"] = static_cast<double>(tokens) * passes / elapsed;
  std::cout << j.dump() << "\n";
  return 0;
}

int run(const TokenizeFlags& f) {
  const int inputs = (f.has_text ? 1 : 0) + (f.jsonl.empty() ? 0 : 1) + (f.bench.empty() ? 0 : 1);
  if (inputs != 1) fail("give exactly one of --text TEXT, --jsonl FILE or --bench FILE");
  const tok::Tokenizer t = tok::Tokenizer::load(f.tokenizer);
  if (!f.bench.empty()) return run_bench(t, f);
  if (f.has_text) {
    print_result(t, f.text, f);
    return 0;
  }
  std::ifstream in(f.jsonl, std::ios::binary);
  if (!in) fail("cannot read --jsonl file {}", f.jsonl);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("{} line {}: not JSON ({}); each line must be one JSON string", f.jsonl, n, e.what());
    }
    if (!j.is_string())
      fail("{} line {}: expected a JSON string, got {}", f.jsonl, n, j.type_name());
    print_result(t, j.get<std::string>(), f);
  }
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "encode text with a Hugging Face tokenizer and decode it back");
  cmd->add_option("--tokenizer", flags->tokenizer, "tokenizer.json or a directory holding it")
      ->required();
  cmd->add_option("--text", flags->text, "the text to encode")->each([flags](const std::string&) {
    flags->has_text = true;
  });
  cmd->add_option("--jsonl", flags->jsonl,
                  "a file with one JSON string per line; one output line per input");
  cmd->add_option("--bench", flags->bench,
                  "measure single-thread encode throughput (MB/s) on this text file");
  cmd->add_option("--bench-seconds", flags->bench_seconds, "with --bench: how long to measure");
  cmd->add_flag("--bench-lines", flags->bench_lines,
                "with --bench: encode each line as its own input instead of the whole file");
  cmd->add_flag("--json", flags->json,
                "print {\"ids\": [...], \"text\": \"...\"} per input (text = the ids decoded)");
  cmd->add_flag("--add-special-tokens", flags->add_special_tokens,
                "add the post-processor's tokens (e.g. BOS)");
  cmd->add_flag("--skip-special-tokens", flags->skip_special_tokens,
                "leave special tokens out of the decoded text");
  cmd->callback([flags, &exit_code]() { exit_code = run_command([&] { return run(*flags); }); });
}

}  // namespace strata::cli
