// strata serve: an OpenAI-compatible HTTP server over the continuous-batching scheduler.
// Flags are named as SGLang's launch_server names them. The whole configuration is checked,
// and the port bound, before weights load; SIGTERM or SIGINT aborts in-flight requests
// (each client gets its answer with finish_reason "abort") and exits cleanly.
// With --pp-size N it re-runs itself under mpirun as generate does (dist/launch.h): process 0
// serves HTTP and the other stages follow its steps (server/pipeline_relay.h,
// docs/pipeline_parallel.md).
#include <fmt/ranges.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/launch.h"
#include "dist/mpi_transport.h"
#include "dist/partition.h"
#include "grammar/grammar_compiler.h"
#include "runtime/capabilities.h"
#include "runtime/eos_tokens.h"
#include "runtime/scheduler.h"
#include "server/http_server.h"
#include "server/pipeline_relay.h"
#include "server/reasoning.h"
#include "server/tokenizer_codec.h"
#include "server/tool_calls.h"

namespace strata::cli {

namespace {

struct ServeFlags {
  ModelFlags model;
  std::string tokenizer_path;  // default: the model directory, when it has tokenizer.json
  std::string host = "127.0.0.1";
  int port = 30000;
  std::string served_model_name;
  int max_running_requests = 64;
  int max_queued_requests = -1;  // -1: no limit
  int chunked_prefill_size = 8192;
  int micro_batches = 0;  // 0: one per pipeline stage
  bool enable_mixed_chunk = false;
  bool disable_radix_cache = false;
  bool disable_hybrid_swa_memory = false;
  double schedule_conservativeness = 1.0;
  int http_threads = 256;
  std::string api_key;
  std::vector<std::string> allowed_origins;
  bool log_requests = false;
  bool enable_metrics = false;     // accepted: /metrics is always served
  bool trust_remote_code = false;  // accepted: strata runs no code from model directories
  std::string tool_call_parser;
  std::string reasoning_parser;
  std::string chat_template;  // --chat-template FILE|NAME
  bool skip_tokenizer_init = false;
  // SGLang flags strata takes only at the value it runs with (each refused otherwise, with
  // what strata does instead).
  std::string kv_cache_dtype = "auto", schedule_policy = "fcfs", revision;
  int stream_interval = 1;
  int max_prefill_tokens = 0;  // 0: not given
  // SGLang's --grammar-backend: xgrammar, outlines and llguidance all name strata's own engine
  // (src/grammar), "none" turns structured output off.
  std::string grammar_backend = "xgrammar";
  bool disable_overlap_grammar_masks = false;
  bool enable_jump_forward = false;
  // SGLang's --sampling-defaults: "model" (generation_config.json's, as vLLM's
  // --generation-config auto) or "openai".
  std::string sampling_defaults = "model";
};

// --allowed-origins as vLLM spells its value (a JSON list, '["*"]') or as plain origins.
std::vector<std::string> origins(const std::vector<std::string>& given) {
  std::vector<std::string> out;
  for (const auto& g : given) {
    if (!g.empty() && g.front() == '[') {
      const json list = json::parse(g, nullptr, false);
      if (list.is_array())
        for (const auto& o : list)
          if (o.is_string()) out.push_back(o.get<std::string>());
      continue;
    }
    out.push_back(g);
  }
  return out;
}

std::vector<std::string> serve_problems(const ServeFlags& f) {
  std::vector<std::string> problems;
  if (f.port < 0 || f.port > 65535)
    problems.push_back(
        fmt::format("--port must be in 0..65535 (0: any free port), got {}", f.port));
  if (f.host.empty())
    problems.push_back("--host is empty: give an address such as 127.0.0.1 or 0.0.0.0");
  if (f.chunked_prefill_size < -1 || f.chunked_prefill_size == 0)
    problems.push_back(
        fmt::format("--chunked-prefill-size must be positive, or -1 to turn chunking off; got {}",
                    f.chunked_prefill_size));
  if (f.micro_batches < 0 || f.micro_batches > 64)
    problems.push_back(
        fmt::format("--micro-batches must be in 1..64 (or 0: one per pipeline stage), got {}",
                    f.micro_batches));
  if (!(f.schedule_conservativeness > 0))
    problems.push_back(fmt::format("--schedule-conservativeness must be > 0, got {}",
                                   f.schedule_conservativeness));
  if (f.disable_radix_cache && f.model.mamba_radix_cache_strategy == "extra_buffer")
    problems.push_back(
        "--mamba-radix-cache-strategy extra_buffer keeps state checkpoints for the prefix cache, "
        "which --disable-radix-cache turns off: drop one of the two flags");
  if (!log::set_level(f.model.log_level))
    problems.push_back(fmt::format(
        "--log-level must be one of debug, info, warning, error; got '{}'", f.model.log_level));
  if (!f.tool_call_parser.empty() && !tool_call_format_known(f.tool_call_parser))
    problems.push_back(
        fmt::format("--tool-call-parser '{}' is not one strata parses; use one of {}",
                    f.tool_call_parser, tool_call_formats()));
  if (f.kv_cache_dtype != "auto")
    problems.push_back(fmt::format(
        "--kv-cache-dtype {}: strata keeps the KV cache in f32 on cpu and bf16 on cuda; leave "
        "it out or pass auto",
        f.kv_cache_dtype));
  if (f.schedule_policy != "fcfs")
    problems.push_back(fmt::format(
        "--schedule-policy {}: strata admits requests first come, first served (the prefix cache "
        "still matches every prompt); leave it out or pass fcfs",
        f.schedule_policy));
  if (f.stream_interval != 1)
    problems.push_back(fmt::format(
        "--stream-interval {}: strata streams every decoded token (interval 1); leave it out",
        f.stream_interval));
  if (f.max_prefill_tokens != 0)
    problems.push_back(
        fmt::format("--max-prefill-tokens {}: strata bounds prefill work per pass with "
                    "--chunked-prefill-size; use that instead",
                    f.max_prefill_tokens));
  if (!f.revision.empty())
    problems.push_back(fmt::format(
        "--revision {}: strata loads a local directory and downloads nothing; check the "
        "revision out there (e.g. huggingface-cli download --revision {}) and pass its path",
        f.revision, f.revision));
  if (f.skip_tokenizer_init && !f.chat_template.empty())
    problems.push_back("--chat-template needs the tokenizer, which --skip-tokenizer-init skips");
  if (!f.reasoning_parser.empty() && !reasoning_format_known(f.reasoning_parser))
    problems.push_back(fmt::format("--reasoning-parser '{}' is not one strata reads; use one of {}",
                                   f.reasoning_parser, reasoning_formats()));
  for (const auto& g : f.allowed_origins)
    if (!g.empty() && g.front() == '[' && !json::parse(g, nullptr, false).is_array())
      problems.push_back(
          fmt::format("--allowed-origins '{}' is not a JSON list; give origins, or '[\"*\"]'", g));
  if (f.grammar_backend != "xgrammar" && f.grammar_backend != "outlines" &&
      f.grammar_backend != "llguidance" && f.grammar_backend != "none")
    problems.push_back(fmt::format(
        "--grammar-backend must be one of xgrammar, outlines, llguidance (each runs strata's "
        "grammar engine) or none; got '{}'",
        f.grammar_backend));
  if (f.sampling_defaults != "model" && f.sampling_defaults != "openai")
    problems.push_back(fmt::format(
        "--sampling-defaults must be model (generation_config.json's) or openai; got '{}'",
        f.sampling_defaults));
  if (f.max_queued_requests < -1)
    problems.push_back(fmt::format("--max-queued-requests must be >= 0 (or -1: no limit), got {}",
                                   f.max_queued_requests));
  if (f.http_threads < 4 || f.http_threads > 4096)
    problems.push_back(fmt::format("--http-threads must be in 4..4096, got {}", f.http_threads));
  return problems;
}

// Set by SIGTERM/SIGINT (and SIGUSR1, what a pipeline's launcher turns its SIGTERM into,
// dist/launch.h). A handler, not a blocked-signal wait: BLAS and OpenMP start threads
// before main() whose signal masks we do not control, and any of them may receive the signal.
volatile std::sig_atomic_t g_stop_requested = 0;
extern "C" void request_stop(int) {
  g_stop_requested = 1;
}

// The tokenizer: --tokenizer-path, or the model directory's when it has one. Null (token ids
// only) when neither; a problem is added when --tokenizer-path cannot be loaded.
std::unique_ptr<TokenizerCodec> load_tokenizer(const ServeFlags& f, const ModelConfig& config,
                                               std::vector<std::string>& problems) {
  namespace fs = std::filesystem;
  if (f.skip_tokenizer_init) return nullptr;  // token ids in and out, as SGLang's flag
  const bool given = !f.tokenizer_path.empty();
  const std::string dir = given ? f.tokenizer_path : f.model.model;
  if (!given && !fs::exists(fs::path(dir) / "tokenizer.json")) {
    std::fprintf(stderr,
                 "strata serve: %s has no tokenizer.json: serving token ids only (text prompts, "
                 "chat and stop strings need --tokenizer-path DIR)\n",
                 dir.c_str());
    return nullptr;
  }
  std::unique_ptr<TokenizerCodec> codec;
  try {
    codec = TokenizerCodec::load(dir, f.chat_template);
  } catch (const Error& e) {
    problems.push_back(fmt::format(
        "{}: {}", given ? "--tokenizer-path" : "the model directory's tokenizer", e.what()));
    return nullptr;
  }
  if (codec->tokenizer().vocab_size() > config.vocab_size)
    std::fprintf(stderr,
                 "strata serve: warning: the tokenizer at %s has %d ids but the model only %d; "
                 "text that encodes to the extra ids is refused (is it this model's tokenizer?)\n",
                 dir.c_str(), codec->tokenizer().vocab_size(), config.vocab_size);
  if (!codec->chat_template_problem().empty())
    std::fprintf(stderr, "strata serve: no chat completions: %s\n",
                 codec->chat_template_problem().c_str());
  return codec;
}

// The scheduler of one stage (every stage of a pipeline makes its own the same way).
std::unique_ptr<Scheduler> make_scheduler(ModelRunner& runner, const SchedulerOptions& sched,
                                          const TokenizerCodec* codec, Transport* pipeline) {
  auto scheduler = std::make_unique<Scheduler>(runner, sched);
  if (codec) {
    scheduler->set_detokenizer([codec](bool skip) { return codec->stream(skip); });
    scheduler->set_retokenizer(
        [codec](const std::string& text) { return codec->encode(text, false); });
  }
  scheduler->set_pipeline(pipeline, 0);  // process 0 answers
  return scheduler;
}

// The stages' schedulers build the same batches only over the same slots: KV pages and
// recurrent-state slots (on a GPU each stage sizes its KV cache from its own free memory).
void check_stages_agree(StageContext& stage) {
  ModelRunner& runner = stage.runner;
  const int64_t mine[2] = {runner.memory().allocator().usable_pages(),
                           runner.state_pool() ? runner.state_pool()->num_slots() : 0};
  std::vector<char> bytes(sizeof(mine));
  std::memcpy(bytes.data(), mine, sizeof(mine));
  stage.control.broadcast_to_job(bytes);
  int64_t first[2];
  std::memcpy(first, bytes.data(), sizeof(first));
  if (first[0] != mine[0] || first[1] != mine[1])
    fail(
        "this stage has {} KV pages and {} recurrent-state slots, stage 0 has {} and {}; every "
        "stage must hold the same slots: give --max-total-tokens (and --max-mamba-cache-size)",
        mine[0], mine[1], first[0], first[1]);
}

// The HTTP server over `runner` until SIGTERM/SIGINT. `pipeline`/`relay`: process 0 of a
// pipeline (the other stages follow its steps).
int serve_http(const ServeFlags& f, const ServerOptions& so, const SchedulerOptions& sched,
               const TokenizerCodec* codec, ModelRunner& runner, Transport* pipeline,
               StepRelay* relay) {
  ServerMetrics metrics;
  const std::unique_ptr<Scheduler> scheduler = make_scheduler(runner, sched, codec, pipeline);
  // Beyond the running and queued requests allowed, clients get a 503 with Retry-After.
  const size_t max_in_flight = f.max_queued_requests < 0
                                   ? 0
                                   : static_cast<size_t>(f.max_running_requests) +
                                         static_cast<size_t>(f.max_queued_requests);
  auto engine = std::make_unique<Engine>(*scheduler, metrics, max_in_flight, relay);
  ServerContext ctx{*engine, metrics, codec, so};
  if (relay) {
    // Masks would be needed where the last stage draws and on every tensor-parallel rank (each
    // draws), from grammar state kept on process 0: the step message does not carry it.
    const std::string how =
        f.model.tp_size > 1 && pipeline
            ? fmt::format("--pp-size {} --tp-size {}", pipeline->size(), f.model.tp_size)
        : f.model.tp_size > 1 ? fmt::format("--tp-size {}", f.model.tp_size)
                              : fmt::format("--pp-size {}", pipeline->size());
    ctx.grammar_unavailable = fmt::format(
        "the server was started with {}, and structured output is not carried to the other "
        "processes yet",
        how);
  } else if (f.grammar_backend == "none") {
    ctx.grammar_unavailable = "the server was started with --grammar-backend none";
  } else if (!codec) {
    ctx.grammar_unavailable = "the server has no tokenizer (start it with --tokenizer-path DIR)";
  } else {
    ctx.grammars = std::make_shared<grammar::GrammarCompiler>(
        grammar::TokenVocabulary::from_tokenizer(codec->tokenizer()));
  }
  HttpServer http(std::move(ctx));
  const int port = http.bind();
  engine->start();

  std::atomic<bool> done{false};
  std::thread signals([&] {
    while (!done && !g_stop_requested) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!g_stop_requested) return;
    std::fprintf(stderr, "strata serve: stopping; aborting in-flight requests\n");
    engine->shutdown();
    while (!done) {  // repeated: a stop() that comes before listening starts is lost
      http.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::fprintf(stderr, "strata serve: listening on http://%s:%d (model %s)\n", f.host.c_str(), port,
               so.served_model_name.c_str());
  std::fflush(stderr);
  http.serve();
  done = true;
  signals.join();
  engine->shutdown();
  std::fprintf(stderr, "strata serve: stopped\n");
  return 0;
}

int run(const ServeFlags& f) {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  // A pipeline's launcher hands its SIGTERM to the stages as SIGUSR1 (dist/launch.h).
  sigaction(SIGUSR1, &action, nullptr);

  const ModelConfig config = ModelConfig::load(f.model.model);
  auto problems = serve_problems(f);
  const std::unique_ptr<TokenizerCodec> codec = load_tokenizer(f, config, problems);
  RunnerOptions options;
  try {
    options = f.model.runner_options(&config);
    options.max_running_requests = f.max_running_requests;
    options.radix_cache = !f.disable_radix_cache;
    // The window space of sliding layers is sized from the most tokens a pass adds: a prefill
    // chunk and a decode token per running request (--enable-mixed-chunk). Without chunking a
    // pass has no such bound, and the sliding layers stay in the full space.
    options.hybrid_swa_memory = !f.disable_hybrid_swa_memory;
    options.max_pass_tokens =
        f.chunked_prefill_size > 0 ? f.chunked_prefill_size + f.max_running_requests : 0;
    for (auto& p : options.problems(config)) problems.push_back(std::move(p));
  } catch (const Error& e) {
    problems.push_back(e.what());
  }
  PipelineSetup pipeline;
  try {
    pipeline = f.model.pipeline_setup();
  } catch (const Error& e) {
    problems.push_back(e.what());
  }
  const int tp_size = f.model.tp_size;
  const bool distributed = pipeline.pp_size > 1 || tp_size > 1;
  if (pipeline.pp_size > 1) {
    // Untested on GPUs so far: refused rather than served wrong.
    if (f.model.device != "cpu")
      problems.push_back(fmt::format(
          "--pp-size {} with --device {}: strata serve pipelines on cpu only so far; use "
          "--device cpu, or serve on one GPU without --pp-size",
          pipeline.pp_size, f.model.device));
    // Every stage's scheduler must see the same slot spaces, and a stage without sliding
    // layers would have no window space: the sliding layers keep every position.
    options.hybrid_swa_memory = false;
  }
  if (problems.size() == 1) fail("{}", problems.front());
  if (!problems.empty()) fail("invalid configuration:\n  - {}", fmt::join(problems, "\n  - "));

  SchedulerOptions sched;
  sched.chunked_prefill_size = f.chunked_prefill_size;
  sched.enable_mixed_chunk = f.enable_mixed_chunk;
  sched.micro_batches = f.micro_batches > 0 ? f.micro_batches : pipeline.pp_size;
  sched.disable_radix_cache = f.disable_radix_cache;
  sched.overlap_grammar_masks =
      !f.disable_overlap_grammar_masks &&
      !check_capability("grammar_mask_overlap", "overlap", f.model.device);
  sched.enable_jump_forward = f.enable_jump_forward;
  sched.init_new_token_ratio = std::min(1.0, 0.7 * f.schedule_conservativeness);
  sched.min_new_token_ratio = std::min(1.0, 0.14 * f.schedule_conservativeness);
  sched.eos_token_ids =
      model_eos_token_ids(config, codec ? codec->eos_token_id() : std::optional<int>());

  ServerOptions so;
  so.host = f.host;
  so.port = f.port;
  so.http_threads = f.http_threads;
  so.api_key = f.api_key;
  so.allowed_origins = origins(f.allowed_origins);
  so.log_requests = f.log_requests;
  so.tool_call_parser = f.tool_call_parser;
  so.reasoning_parser = f.reasoning_parser;
  if (f.sampling_defaults == "model") {
    so.sampling_defaults = read_generation_defaults(f.model.model);
    if (!so.sampling_defaults.source.empty())
      log::info("sampling defaults from generation_config.json (requests may override): {}",
                so.sampling_defaults.source.dump());
  }
  so.server_args = {{"model_path", f.model.model},
                    {"tokenizer_path", f.tokenizer_path.empty() ? f.model.model : f.tokenizer_path},
                    {"host", f.host},
                    {"port", f.port},
                    {"device", f.model.device},
                    {"page_size", f.model.page_size},
                    {"max_running_requests", f.max_running_requests},
                    {"max_queued_requests", f.max_queued_requests},
                    {"max_total_tokens", f.model.max_total_tokens},
                    {"chunked_prefill_size", f.chunked_prefill_size},
                    {"pp_size", pipeline.pp_size},
                    {"tp_size", tp_size},
                    {"micro_batches", sched.micro_batches},
                    {"enable_mixed_chunk", f.enable_mixed_chunk},
                    {"disable_radix_cache", f.disable_radix_cache},
                    {"disable_hybrid_swa_memory", f.disable_hybrid_swa_memory},
                    {"schedule_conservativeness", f.schedule_conservativeness},
                    {"random_seed", f.model.seed},
                    {"log_level", f.model.log_level},
                    {"log_requests", f.log_requests},
                    {"api_key_set", !f.api_key.empty()},
                    {"allowed_origins", so.allowed_origins},
                    {"tool_call_parser", f.tool_call_parser},
                    {"reasoning_parser", f.reasoning_parser},
                    {"chat_template", f.chat_template},
                    {"skip_tokenizer_init", f.skip_tokenizer_init},
                    {"grammar_backend", f.grammar_backend},
                    {"disable_overlap_grammar_masks", f.disable_overlap_grammar_masks},
                    {"enable_jump_forward", f.enable_jump_forward},
                    {"sampling_defaults", f.sampling_defaults}};
  so.served_model_name =
      !f.served_model_name.empty()
          ? f.served_model_name
          : std::filesystem::path(f.model.model).lexically_normal().filename().string();
  if (so.served_model_name.empty()) so.served_model_name = f.model.model;

  if (distributed) {
    // The launcher checks what it can (the partition, the port), then re-runs this command
    // line as one process per stage and tensor-parallel rank under mpirun (pp x tp); each of
    // those joins the job as its place in the grid.
    if (!inside_mpi_job()) {
      validate_pipeline_job(config, options, pipeline, {});
      // A taken port or a foreign address is reported now, not after the stages load.
      HttpServer::check_can_listen(so.host, so.port);
      return relaunch_under_mpirun(pipeline.pp_size * tp_size, SIGUSR1);
    }
    // The engine thread calls MPI, not the main thread: SERIALIZED.
    run_stage_process(config, options, pipeline, true, [&](StageContext& stage) {
      check_stages_agree(stage);
      // Passes go through the stages' transport only when there are stages to go through;
      // tensor parallelism alone runs the one-process pass on every rank.
      Transport* stages = pipeline.pp_size > 1 ? &stage.transport : nullptr;
      if (stage.control.world_rank() == 0) {
        StepRelay relay(stage.control, stage.where);
        serve_http(f, so, sched, codec.get(), stage.runner, stages, &relay);
        return;
      }
      // Process 0 handles the signals and tells this one to stop.
      signal(SIGTERM, SIG_IGN);
      signal(SIGINT, SIG_IGN);
      signal(SIGUSR1, SIG_IGN);
      const auto scheduler = make_scheduler(stage.runner, sched, codec.get(), stages);
      run_follower(*scheduler, stage.control);
    });
    return 0;
  }
  if (!pipeline.layers_per_stage.empty())
    partition_layers(config.num_layers, 1, pipeline.layers_per_stage);
  // A taken port or a foreign address is reported now, not after the weights load.
  HttpServer::check_can_listen(so.host, so.port);
  log::info("loading {} ({}, {} layers, vocab {}) on {}{}", f.model.model, config.architecture,
            config.num_layers, config.vocab_size, f.model.device,
            f.model.load_format == "dummy" ? ", dummy weights" : "");
  const auto load_start = std::chrono::steady_clock::now();
  ModelRunner runner(config, options);
  log::info("ready in {:.1f} s",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
  for (const std::string& line : runner.startup_report(1)) log::info("{}", line);
  return serve_http(f, so, sched, codec.get(), runner, nullptr, nullptr);
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "serve a model over HTTP (OpenAI-compatible and SGLang's /generate)");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  flags->model.add_to(*cmd);
  cmd->add_option("--tokenizer-path", flags->tokenizer_path,
                  "directory with tokenizer.json (and tokenizer_config.json: chat template, EOS); "
                  "default: --model when it has one, else token ids only");
  cmd->add_option("--host", flags->host, "address to listen on");
  cmd->add_option("--port", flags->port, "port to listen on (0: any free port, printed at start)");
  cmd->add_option("--served-model-name", flags->served_model_name,
                  "the model name clients use (default: the directory name)");
  cmd->add_option("--max-running-requests", flags->max_running_requests,
                  "requests decoded together at most");
  cmd->add_option("--max-queued-requests", flags->max_queued_requests,
                  "requests waiting beyond the running ones at most; more get a 503 with "
                  "Retry-After (-1: no limit)");
  cmd->add_option("--chunked-prefill-size", flags->chunked_prefill_size,
                  "prompt tokens per prefill pass (-1: whole prompts)");
  cmd->add_option("--micro-batches", flags->micro_batches,
                  "passes in flight, each over at most 1/M of the running requests, so that "
                  "pipeline stages work on different ones (default 0: one per --pp-size stage)");
  cmd->add_flag("--enable-mixed-chunk", flags->enable_mixed_chunk,
                "decode running requests in the same pass as a prefill chunk");
  cmd->add_flag("--disable-radix-cache", flags->disable_radix_cache, "turn the prefix cache off");
  cmd->add_flag("--disable-hybrid-swa-memory", flags->disable_hybrid_swa_memory,
                "keep sliding-window layers' KV for every position (default: only their window, "
                "in a second slot space)");
  cmd->add_option("--schedule-conservativeness", flags->schedule_conservativeness,
                  "> 1 keeps more memory for running requests; < 1 admits more");
  cmd->add_option("--http-threads", flags->http_threads,
                  "connections served at once (each open stream holds one)");
  cmd->add_option("--api-key", flags->api_key,
                  "clients must send 'Authorization: Bearer KEY' (all routes but /health, "
                  "/health_generate, /metrics)");
  cmd->add_option("--allowed-origins", flags->allowed_origins,
                  "CORS: origins browsers may call from ('*': any; vLLM's JSON list too); "
                  "default: none");
  cmd->add_flag("--log-requests", flags->log_requests,
                "log every request (method, path, status, body) at info level");
  cmd->add_flag("--enable-metrics", flags->enable_metrics,
                "accepted for SGLang's scripts: GET /metrics is always served");
  cmd->add_flag("--trust-remote-code", flags->trust_remote_code,
                "accepted for SGLang's scripts: strata runs no code from model directories");
  cmd->add_option("--tool-call-parser", flags->tool_call_parser,
                  "how tool calls are read from the output: hermes | qwen25 | qwen | llama3 | "
                  "llama3_json | llama4 | deepseekv3 | deepseekv31 | mistral | gpt-oss (default: "
                  "from the chat template)");
  cmd->add_option("--chat-template", flags->chat_template,
                  "the chat template: a file, or a template named in tokenizer_config.json "
                  "(default: the tokenizer's)");
  cmd->add_flag("--skip-tokenizer-init", flags->skip_tokenizer_init,
                "load no tokenizer: prompts and answers are token ids");
  cmd->add_option("--kv-cache-dtype", flags->kv_cache_dtype,
                  "auto only: the KV cache is f32 on cpu, bf16 on cuda");
  cmd->add_option("--schedule-policy", flags->schedule_policy,
                  "fcfs only: first come, first served");
  cmd->add_option("--stream-interval", flags->stream_interval, "1 only: every token is streamed");
  cmd->add_option("--max-prefill-tokens", flags->max_prefill_tokens,
                  "refused: use --chunked-prefill-size");
  cmd->add_option("--revision", flags->revision, "refused: strata loads a local directory");
  cmd->add_option("--reasoning-parser", flags->reasoning_parser,
                  "split the reasoning of thinking models into reasoning_content: qwen3 | "
                  "qwen3-thinking | deepseek-r1 | deepseek-v3 | gpt-oss (default: none)");
  cmd->add_option("--grammar-backend", flags->grammar_backend,
                  "structured output: xgrammar | outlines | llguidance (all strata's own grammar "
                  "engine) | none (off)");
  cmd->add_flag("--disable-overlap-grammar-masks", flags->disable_overlap_grammar_masks,
                "structured output: compute each pass's grammar masks before it runs, instead of "
                "on a worker thread while its forward runs");
  cmd->add_flag("--enable-jump-forward", flags->enable_jump_forward,
                "structured output: append the tokens a grammar forces (fixed keys, punctuation) "
                "without drawing them one per pass; they are computed as an extend");
  cmd->add_option("--sampling-defaults", flags->sampling_defaults,
                  "defaults of the sampling fields a request leaves out: model "
                  "(generation_config.json's temperature, top_p, top_k, min_p, "
                  "repetition_penalty, max_new_tokens) | openai");
  cmd->callback([flags, &exit_code]() { exit_code = run_command([&] { return run(*flags); }); });
}

}  // namespace strata::cli
