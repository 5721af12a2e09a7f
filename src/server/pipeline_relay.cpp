#include "server/pipeline_relay.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "dist/mpi_transport.h"
#include "model/json_util.h"

namespace strata {

namespace {

// The control messages: {"kind": "step" | "heartbeat" | "stop", ...the step's inputs}.
json encode_request(uint64_t id, const ServeRequest& r) {
  // validate() refused grammars (not carried); nothing else is left out here.
  STRATA_CHECK(!r.grammar, "request {} has a grammar, which the pipeline does not carry", id);
  const SamplingParams& p = r.sampling;
  json bias = json::array();
  for (const auto& [token, value] : p.logit_bias) bias.push_back({token, value});
  return {{"id", id},
          {"input_ids", r.input_ids},
          {"stop_strings", r.stop_strings},
          {"skip_special_tokens", r.skip_special_tokens},
          {"top_logprobs", r.top_logprobs},
          {"return_logits", r.return_logits},
          {"prompt_logprobs_from", r.prompt_logprobs_from},
          {"prompt_top_logprobs", r.prompt_top_logprobs},
          {"temperature", p.temperature},
          {"top_k", p.top_k},
          {"top_p", p.top_p},
          {"min_p", p.min_p},
          {"presence_penalty", p.presence_penalty},
          {"frequency_penalty", p.frequency_penalty},
          {"repetition_penalty", p.repetition_penalty},
          {"min_new_tokens", p.min_new_tokens},
          {"logit_bias", bias},
          {"seed", p.seed},
          {"max_new_tokens", p.max_new_tokens},
          {"stop_at_eos", p.stop_at_eos},
          {"stop_token_ids", p.stop_token_ids}};
}

std::pair<uint64_t, ServeRequest> decode_request(const json& j) {
  ServeRequest r;
  j.at("input_ids").get_to(r.input_ids);
  j.at("stop_strings").get_to(r.stop_strings);
  j.at("skip_special_tokens").get_to(r.skip_special_tokens);
  j.at("top_logprobs").get_to(r.top_logprobs);
  j.at("return_logits").get_to(r.return_logits);
  j.at("prompt_logprobs_from").get_to(r.prompt_logprobs_from);
  j.at("prompt_top_logprobs").get_to(r.prompt_top_logprobs);
  SamplingParams& p = r.sampling;
  j.at("temperature").get_to(p.temperature);
  j.at("top_k").get_to(p.top_k);
  j.at("top_p").get_to(p.top_p);
  j.at("min_p").get_to(p.min_p);
  j.at("presence_penalty").get_to(p.presence_penalty);
  j.at("frequency_penalty").get_to(p.frequency_penalty);
  j.at("repetition_penalty").get_to(p.repetition_penalty);
  j.at("min_new_tokens").get_to(p.min_new_tokens);
  for (const auto& b : j.at("logit_bias"))
    p.logit_bias.emplace_back(b.at(0).get<int>(), b.at(1).get<float>());
  j.at("seed").get_to(p.seed);
  j.at("max_new_tokens").get_to(p.max_new_tokens);
  j.at("stop_at_eos").get_to(p.stop_at_eos);
  j.at("stop_token_ids").get_to(p.stop_token_ids);
  return {j.at("id").get<uint64_t>(), std::move(r)};
}

}  // namespace

std::string encode_step(const StepInputs& inputs) {
  json submits = json::array();
  for (const auto& [id, request] : inputs.submits) submits.push_back(encode_request(id, request));
  return json{{"kind", "step"},
              {"submits", submits},
              {"aborts", inputs.aborts},
              {"flush_cache", inputs.flush_cache}}
      .dump();
}

StepInputs decode_step(const std::string& message) {
  const json j = json::parse(message);
  STRATA_CHECK(j.at("kind") == "step", "control message of kind '{}'", j.at("kind").dump());
  StepInputs inputs;
  for (const auto& r : j.at("submits")) inputs.submits.push_back(decode_request(r));
  j.at("aborts").get_to(inputs.aborts);
  j.at("flush_cache").get_to(inputs.flush_cache);
  return inputs;
}

bool apply_step_inputs(Scheduler& scheduler, StepInputs inputs) {
  for (auto& [id, request] : inputs.submits) scheduler.submit(id, std::move(request));
  for (uint64_t id : inputs.aborts) scheduler.abort(id);
  return inputs.flush_cache && scheduler.flush_cache();
}

StepRelay::StepRelay(MpiTransport& control, std::string where)
    : control_(control), where_(std::move(where)), stages_(control.size()) {}

namespace {

SchedulerStats::Stage stage_of(const SchedulerStats& s) {
  return {s.pipeline_wait_s, s.used_pages, s.used_state_slots, s.running, s.forward_passes};
}

}  // namespace

std::vector<SchedulerStats::Stage> StepRelay::stages(const SchedulerStats& mine) {
  // Tensor-parallel rank 0 of each stage reports it (world rank = stage * tp_size).
  for (int stage = 1; stage < control_.size(); ++stage) {
    const int peer = stage * control_.tp_size();
    while (const auto report = control_.try_recv_message(peer)) {
      const json j = json::parse(*report);
      STRATA_CHECK(j.at("kind") == "stage", "control message of kind {} from process {}",
                   j.at("kind").dump(), peer);
      stages_[stage] = {j.at("wait_s").get<double>(), j.at("used_pages").get<int64_t>(),
                        j.at("used_state_slots").get<int64_t>(), j.at("running").get<int>(),
                        j.at("forward_passes").get<int64_t>()};
    }
  }
  stages_[0] = stage_of(mine);
  return stages_;
}

void StepRelay::post(const std::string& message) {
  for (int peer = 1; peer < control_.world_size(); ++peer) control_.post_message(peer, message);
}

void StepRelay::before_step(const StepInputs& inputs) {
  post(encode_step(inputs));
}

void StepRelay::heartbeat() {
  post(json{{"kind", "heartbeat"}}.dump());
}

// Four heartbeats within the followers' --pp-timeout, at most one a second.
int StepRelay::heartbeat_ms() const {
  return std::clamp(static_cast<int>(control_.timeout() * 1000 / 4), 1, 1000);
}

void StepRelay::stop() {
  post(json{{"kind", "stop"}}.dump());
  control_.flush();
}

void StepRelay::fail(const std::string& why) {
  std::fprintf(stderr, "error: %s: %s\n", where_.c_str(), why.c_str());
  control_.abort(1);
  std::_Exit(1);  // abort() ends the process; this keeps [[noreturn]] honest
}

void run_follower(Scheduler& scheduler, MpiTransport& control) {
  // This stage's bubbles go to process 0 (its /metrics) a few times a second, not every step.
  using Clock = std::chrono::steady_clock;
  constexpr auto kReportEvery = std::chrono::milliseconds(250);
  Clock::time_point reported{};
  for (;;) {
    const std::string bytes =
        control.recv_message(0, "the next step or heartbeat from process 0, which runs the server");
    const std::string kind = json::parse(bytes).at("kind").get<std::string>();
    if (kind == "stop") return;
    if (kind == "heartbeat") continue;
    apply_step_inputs(scheduler, decode_step(bytes));
    scheduler.step();                             // the outputs are process 0's to deliver
    const bool reports = control.tp_rank() == 0;  // the stage's other ranks hold the same
    if (reports && (Clock::now() - reported >= kReportEvery || !scheduler.has_work())) {
      reported = Clock::now();
      const SchedulerStats::Stage s = stage_of(scheduler.stats());
      control.post_message(0, json{{"kind", "stage"},
                                   {"wait_s", s.wait_s},
                                   {"used_pages", s.used_pages},
                                   {"used_state_slots", s.used_state_slots},
                                   {"running", s.running},
                                   {"forward_passes", s.forward_passes}}
                                  .dump());
    }
  }
}

}  // namespace strata
