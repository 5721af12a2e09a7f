// strata generate: run prompts (given as token ids) through a model as one batch and print
// the generated ids, optionally as JSON with the logits that chose each token.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "core/error.h"
#include "runtime/generator.h"

namespace strata::cli {

namespace {

struct GenerateFlags {
  ModelFlags model;
  std::string input_ids;
  std::string input_ids_file;
  int max_new_tokens = 16;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  bool json = false;
  bool return_logits = false;
  bool stop_at_eos = false;
  int chunked_prefill_size = 0;
};

std::vector<int> parse_ids(const std::string& text, const std::string& where) {
  std::vector<int> ids;
  std::string cur;
  auto flush = [&]() {
    if (cur.empty()) return;
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(cur, &used);
    } catch (...) {
      used = 0;
    }
    if (used != cur.size() || v < INT32_MIN || v > INT32_MAX)
      fail("{}: '{}' is not a token id; give comma-separated integers like 3,17,42", where, cur);
    ids.push_back(static_cast<int>(v));
    cur.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\r') flush();
    else cur += c;
  }
  flush();
  return ids;
}

int run(const GenerateFlags& f) {
  std::vector<std::vector<int>> prompts;
  if (!f.input_ids.empty() && !f.input_ids_file.empty())
    fail("give either --input-ids or --input-ids-file, not both");
  if (!f.input_ids_file.empty()) {
    std::ifstream in(f.input_ids_file);
    if (!in) fail("cannot read --input-ids-file {}", f.input_ids_file);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      prompts.push_back(parse_ids(line, fmt::format("{} line {}", f.input_ids_file, n)));
    }
    if (prompts.empty()) fail("--input-ids-file {} holds no prompt", f.input_ids_file);
  } else if (!f.input_ids.empty()) {
    prompts.push_back(parse_ids(f.input_ids, "--input-ids"));
  } else {
    fail("nothing to generate from: give --input-ids 1,2,3 or --input-ids-file FILE");
  }

  const ModelConfig config = ModelConfig::load(f.model.model);
  RunnerOptions options = f.model.runner_options();
  std::vector<GenerateRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateRequest r;
    r.input_ids = prompts[i];
    r.sampling.temperature = f.temperature;
    r.sampling.top_k = f.top_k;
    r.sampling.top_p = f.top_p;
    r.sampling.seed = f.model.seed + i;
    r.sampling.max_new_tokens = f.max_new_tokens;
    r.sampling.stop_at_eos = f.stop_at_eos;
    requests.push_back(std::move(r));
  }
  options.max_running_requests = static_cast<int>(requests.size());
  if (options.max_total_tokens == 0) options.max_total_tokens = kv_slots_needed(requests, options.page_size);
  ModelRunner runner(config, options);
  GenerateOptions gen;
  gen.chunked_prefill_size = f.chunked_prefill_size;
  gen.return_logits = f.return_logits;
  const auto outputs = generate(runner, requests, gen);

  for (size_t i = 0; i < outputs.size(); ++i) {
    if (f.json) {
      nlohmann::json j;
      j["index"] = i;
      j["input_ids"] = prompts[i];
      j["output_ids"] = outputs[i].output_ids;
      j["finish_reason"] = outputs[i].finish_reason;
      if (f.return_logits) j["logits"] = outputs[i].logits;
      std::cout << j.dump() << "\n";
    } else {
      std::cout << "prompt " << i << ": ";
      for (size_t k = 0; k < outputs[i].output_ids.size(); ++k) std::cout << (k ? "," : "") << outputs[i].output_ids[k];
      std::cout << "  (" << outputs[i].finish_reason << ")\n";
    }
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "generate from prompts given as token ids, as one batch");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  flags->model.add_to(*cmd);
  cmd->add_option("--input-ids", flags->input_ids, "comma-separated prompt token ids");
  cmd->add_option("--input-ids-file", flags->input_ids_file, "one comma-separated prompt per line; all run as one batch");
  cmd->add_option("--max-new-tokens", flags->max_new_tokens, "tokens to generate per prompt");
  cmd->add_option("--temperature", flags->temperature, "0 = greedy");
  cmd->add_option("--top-k", flags->top_k, "0 = off");
  cmd->add_option("--top-p", flags->top_p, "1 = off");
  cmd->add_flag("--json", flags->json, "one JSON object per prompt");
  cmd->add_flag("--return-logits", flags->return_logits, "with --json: the full logits behind each output token");
  cmd->add_flag("--stop-at-eos", flags->stop_at_eos, "stop a prompt at the model's EOS token (default: generate --max-new-tokens)");
  cmd->add_option("--chunked-prefill-size", flags->chunked_prefill_size, "feed prompts in pieces of this many tokens (0 = whole)");
  cmd->callback([flags, &exit_code]() { exit_code = run_command([&] { return run(*flags); }); });
}

}  // namespace strata::cli
