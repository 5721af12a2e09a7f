// strata generate: run prompts (token ids, or text through the model's tokenizer and chat
// template) through a model as one batch and print the generated ids and text, optionally as
// JSON with the logits that chose each token. The prompts go through the serving scheduler
// (runtime/generator.h: the offline engine), in one process or as every pipeline stage.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/launch.h"
#include "dist/partition.h"
#include "dist/pipeline_job.h"
#include "runtime/eos_tokens.h"
#include "runtime/generator.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

namespace {

struct GenerateFlags {
  ModelFlags model;
  std::string input_ids;
  std::string input_ids_file;
  std::string prompt;     // text, encoded with the tokenizer's special tokens (e.g. BOS)
  std::string chat;       // a user message, rendered through the chat template
  std::string tokenizer;  // directory with tokenizer.json; default: the model directory
  int max_new_tokens = 16;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  bool json = false;
  bool return_logits = false;
  bool stop_at_eos = false;
  int chunked_prefill_size = 0;
  bool timing = false;
  int micro_batches = 0;
  const CLI::Option* micro_batches_option = nullptr;  // given at all: then at least 1
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
    if (c == ',' || c == ' ' || c == '\t' || c == '\r')
      flush();
    else
      cur += c;
  }
  flush();
  return ids;
}

void print_outputs(const GenerateFlags& f, const std::vector<std::vector<int>>& prompts,
                   const std::vector<GenerateOutput>& outputs, const tok::Tokenizer* tokenizer) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (f.json) {
      nlohmann::json j;
      j["index"] = i;
      j["input_ids"] = prompts[i];
      j["output_ids"] = outputs[i].output_ids;
      j["finish_reason"] = outputs[i].finish_reason;
      if (tokenizer)
        j["text"] = tokenizer->decode(outputs[i].output_ids, /*skip_special_tokens=*/true);
      if (f.return_logits) j["logits"] = outputs[i].logits;
      std::cout << j.dump() << "\n";
    } else {
      std::cout << "prompt " << i << ": ";
      for (size_t k = 0; k < outputs[i].output_ids.size(); ++k)
        std::cout << (k ? "," : "") << outputs[i].output_ids[k];
      std::cout << "  (" << outputs[i].finish_reason << ")\n";
      if (tokenizer)
        std::cout << tokenizer->decode(outputs[i].output_ids, /*skip_special_tokens=*/true) << "\n";
    }
  }
  std::cout.flush();
}

int run(const GenerateFlags& f) {
  std::vector<std::vector<int>> prompts;
  const int sources =
      !f.input_ids.empty() + !f.input_ids_file.empty() + !f.prompt.empty() + !f.chat.empty();
  if (sources > 1) fail("give only one of --input-ids, --input-ids-file, --prompt and --chat");
  // The tokenizer is needed for text prompts; with ids it is used, when present, to print text.
  const std::string tokenizer_dir = f.tokenizer.empty() ? f.model.model : f.tokenizer;
  std::optional<tok::Tokenizer> tokenizer;
  if (!f.prompt.empty() || !f.chat.empty() ||
      std::filesystem::exists(std::filesystem::path(tokenizer_dir) / "tokenizer.json"))
    tokenizer = tok::Tokenizer::load(tokenizer_dir);
  if (!f.prompt.empty()) {
    prompts.push_back(tokenizer->encode(f.prompt, /*add_special_tokens=*/true));
  } else if (!f.chat.empty()) {
    // As transformers' apply_chat_template: the template writes the special tokens itself.
    const auto chat = tok::ChatTemplate::load(tokenizer_dir);
    const nlohmann::json messages =
        nlohmann::json::array({{{"role", "user"}, {"content", f.chat}}});
    prompts.push_back(
        tokenizer->encode(chat.render(messages, /*add_generation_prompt=*/true), false));
  } else if (!f.input_ids_file.empty()) {
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
    fail(
        "nothing to generate from: give --prompt TEXT, --chat TEXT, --input-ids 1,2,3 or "
        "--input-ids-file FILE");
  }

  ModelConfig config = ModelConfig::load(f.model.model);
  // --stop-at-eos stops where serve would (runtime/eos_tokens.h: one EOS set for both).
  config.eos_token_ids = model_eos_token_ids(
      config, tokenizer ? tokenizer_eos_token_id(*tokenizer, tokenizer_dir) : std::optional<int>());
  RunnerOptions options = f.model.runner_options(&config);
  const PipelineSetup pipeline = f.model.pipeline_setup();
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
  // Everything the requests and flags can get wrong is reported before the KV cache is sized
  // from them (a --max-new-tokens of 10^7 would otherwise allocate first and fail after).
  options.validate(config);
  validate_requests(config, options.resolved_max_context_len(config), requests);
  if (options.max_total_tokens == 0)
    options.max_total_tokens = kv_slots_needed(requests, options.page_size);
  GenerateOptions gen;
  gen.chunked_prefill_size = f.chunked_prefill_size;
  gen.return_logits = f.return_logits;
  if (f.chunked_prefill_size < 0)
    fail("--chunked-prefill-size must be >= 0 (0: whole prompts), got {}", f.chunked_prefill_size);
  if (f.micro_batches_option && f.micro_batches_option->count() > 0 && f.micro_batches < 1)
    fail("--micro-batches must be at least 1 (or left out: one per pipeline stage), got {}",
         f.micro_batches);
  gen.micro_batches = f.micro_batches;

  // Prints the outputs (on the last stage when pipelined) and, with --timing, one line per
  // stage: "timing: {...}" on stderr.
  auto report = [&](int stage, bool is_last, const std::vector<GenerateOutput>& outputs,
                    const GenerateStats& stats) {
    if (is_last) print_outputs(f, prompts, outputs, tokenizer ? &*tokenizer : nullptr);
    if (f.timing) {
      nlohmann::json t;
      t["pp_size"] = pipeline.pp_size;
      t["stage"] = stage;
      t["requests"] = requests.size();
      t["prefill_s"] = stats.prefill_s;
      t["decode_s"] = stats.decode_s;
      t["decode_tokens"] = stats.decode_tokens;
      t["decode_throughput_tok_s"] = stats.decode_tokens_per_s();
      t["itl_median_ms"] = stats.itl_median_s * 1e3;
      if (pipeline.pp_size > 1) t["wait_s"] = stats.wait_s;
      if (options.tp_size > 1) {
        t["tp_size"] = options.tp_size;
        t["tp_collective_s"] = stats.tp_collective_s;
        t["tp_collectives"] = stats.tp_collectives;
      }
      // One write per line: stages share the terminal.
      std::fprintf(stderr, "timing: %s\n", t.dump().c_str());
    }
  };
  if (pipeline.pp_size > 1 || options.tp_size > 1) {
    // The launcher checks what it can, then re-runs this command line as one process per
    // stage and tensor-parallel rank under mpirun; each of those joins the job and runs its
    // part.
    if (!inside_mpi_job()) {
      validate_pipeline_job(config, options, pipeline, requests);
      return relaunch_under_mpirun(pipeline.pp_size * options.tp_size);
    }
    run_pipeline_stage(config, options, pipeline, requests, gen, report);
    return 0;
  }
  if (!pipeline.layers_per_stage.empty())
    partition_layers(config.num_layers, 1, pipeline.layers_per_stage);
  ModelRunner runner(config, options);
  for (const std::string& line : runner.startup_report(1)) log::info("{}", line);
  GenerateStats stats;
  const auto outputs = generate(runner, requests, gen, &stats);
  report(0, true, outputs, stats);
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd =
      app.add_subcommand("generate", "generate from prompts given as token ids, as one batch");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  flags->model.add_to(*cmd);
  cmd->add_option("--input-ids", flags->input_ids, "comma-separated prompt token ids");
  cmd->add_option("--input-ids-file", flags->input_ids_file,
                  "one comma-separated prompt per line; all run as one batch");
  cmd->add_option("--prompt", flags->prompt,
                  "prompt text, encoded with the model's tokenizer (adding BOS etc.)");
  cmd->add_option("--chat", flags->chat,
                  "a user message, rendered through the model's chat template");
  cmd->add_option("--tokenizer-path,--tokenizer", flags->tokenizer,
                  "directory with tokenizer.json (default: --model)");
  cmd->add_option("--max-new-tokens", flags->max_new_tokens, "tokens to generate per prompt");
  cmd->add_option("--temperature", flags->temperature, "0 = greedy");
  cmd->add_option("--top-k", flags->top_k, "0 = off");
  cmd->add_option("--top-p", flags->top_p, "1 = off");
  cmd->add_flag("--json", flags->json, "one JSON object per prompt");
  cmd->add_flag("--return-logits", flags->return_logits,
                "with --json: the full logits behind each output token");
  cmd->add_flag("--stop-at-eos", flags->stop_at_eos,
                "stop a prompt at the model's EOS token (default: generate --max-new-tokens)");
  cmd->add_option("--chunked-prefill-size", flags->chunked_prefill_size,
                  "prompt tokens per prefill pass, as serve's (0 = whole prompts)");
  flags->micro_batches_option = cmd->add_option(
      "--micro-batches", flags->micro_batches,
      "passes in flight, each over at most 1/M of the prompts, that take turns through the model "
      "(default: one per pipeline stage)");
  cmd->add_flag("--timing", flags->timing,
                "print prefill/decode wall time and decode throughput to stderr (one JSON line)");
  cmd->callback([flags, &exit_code]() { exit_code = run_command([&] { return run(*flags); }); });
}

}  // namespace strata::cli
