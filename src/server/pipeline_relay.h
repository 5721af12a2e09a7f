#pragma once
// Serving over a pipeline and/or tensor-parallel ranks (strata serve --pp-size N --tp-size T):
// process 0 runs the HTTP server, the Engine and its Scheduler; every other process (each
// stage, each tensor-parallel rank of a stage) runs a follower with a Scheduler of its own in
// lockstep. Before each step the engine hands the step's inputs (new requests with their ids,
// aborts, a cache flush) to the relay, which posts them to every follower as one control
// message over the MPI transport; each follower applies them in the same order
// (apply_step_inputs, the one definition both sides use) and runs the same step, so every
// stage builds the same batches and the pass inside goes through all stages
// (runtime/pipeline_pass.h), the ranks of a stage meeting in its all-reduces. While idle the engine
// sends heartbeats, so a follower can tell an idle process 0 from a hung one within --pp-timeout;
// it ends on process 0's stop message and ignores SIGTERM/SIGINT (process 0 handles them and tells
// it).
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/scheduler.h"

namespace strata {

class MpiTransport;

// What the engine feeds its scheduler before one step.
struct StepInputs {
  std::vector<std::pair<uint64_t, ServeRequest>> submits;  // in arrival order
  std::vector<uint64_t> aborts;
  bool flush_cache = false;
  bool empty() const { return submits.empty() && aborts.empty() && !flush_cache; }
};

// The step message ({"kind": "step", ...}) and back: every field of every ServeRequest and
// its SamplingParams but the grammar (refused under a pipeline); pipeline_relay_test checks
// that each survives and fails when either struct gains a field this does not carry.
std::string encode_step(const StepInputs& inputs);
StepInputs decode_step(const std::string& message);

// Submissions, then aborts, then the flush: the order on every stage. Returns what the flush
// answered (false when none was asked for).
bool apply_step_inputs(Scheduler& scheduler, StepInputs inputs);

// The engine's side of the lockstep (process 0). Every call may block on the transport only
// briefly (messages are posted); a failure of another stage is an Error.
class StepRelay {
 public:
  // `where`: this stage, for error lines ("pipeline stage 0/2 (layers [0, 2))").
  StepRelay(MpiTransport& control, std::string where);
  // Before every step, with its inputs (possibly none).
  void before_step(const StepInputs& inputs);
  // While nothing runs: every heartbeat_ms() at least.
  void heartbeat();
  int heartbeat_ms() const;
  // The engine ended: the followers leave their loops.
  void stop();
  // The engine failed (another stage hung or died: the transport's Error): prints one error
  // line naming this stage and the failure, then ends every process of the job.
  [[noreturn]] void fail(const std::string& why);
  // Every stage's bubbles and memory (SchedulerStats::stages): `mine` (this stage's stats)
  // for this one, the others' as they last reported them (run_follower reports a few times a
  // second while it steps, and whenever its scheduler becomes idle).
  std::vector<SchedulerStats::Stage> stages(const SchedulerStats& mine);

 private:
  void post(const std::string& message);
  MpiTransport& control_;
  std::string where_;
  std::vector<SchedulerStats::Stage> stages_;  // as last reported
};

// A follower stage's loop: steps `scheduler` as process 0's messages say, until the stop
// message. A missing message (process 0 hung) or a failed pass is an Error.
void run_follower(Scheduler& scheduler, MpiTransport& control);

}  // namespace strata
