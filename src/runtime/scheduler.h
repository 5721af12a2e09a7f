#pragma once
// Scheduler: continuous batching for the server (SGLang's scheduler loop, on one thread).
// Requests wait in a queue; each step() admits what fits into the running batch and runs
// one forward pass: a prefill (new prompts, cut into chunks of --chunked-prefill-size
// tokens), a decode (one token for every running request), or with --enable-mixed-chunk
// both at once. Admission is by free KV pages (free plus evictable prefix-cache pages) with
// room kept for the tokens running requests will still generate; when decoding runs out of
// pages anyway, the newest requests are retracted to the front of the queue and resumed
// later with what they already generated: a request is never failed for lack of memory.
//
// Hybrid models (attention + Mamba2): each admitted request holds a recurrent-state slot, and
// the prefix cache keeps state snapshots beside the KV (RadixCache): a hit resumes from a
// copy of the deepest matched snapshot. Where snapshots are taken follows
// --mamba-radix-cache-strategy: no_buffer where a prompt's prefill ends and where a request
// ends; extra_buffer also every --mamba-track-interval prompt tokens. A state exists only at
// the end of a forward pass, so prefill chunks are cut at those positions; with pages of
// more than one token they are page boundaries (the prompt end rounded down, and during
// decode the last page boundary passed, kept in a second slot per request).
//
// The scheduler is not thread-safe; the server's engine thread owns it.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/radix_cache.h"
#include "dist/transport.h"
#include "runtime/mask_worker.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"
#include "runtime/text_stream.h"

namespace strata::grammar {
class CompiledGrammar;
}

namespace strata {

struct SchedulerOptions {
  int chunked_prefill_size = 8192;  // prompt tokens per prefill step; <= 0: no limit
  bool enable_mixed_chunk = false;  // decode running requests in the same pass as a prefill
  bool disable_radix_cache = false;
  // Share of the tokens running requests may still generate that admission keeps free;
  // decays towards `min_new_token_ratio` while memory suffices, back to 1 after a retraction.
  double init_new_token_ratio = 0.7;
  double min_new_token_ratio = 0.1;
  double new_token_ratio_decay = 0.001;
  std::vector<int> eos_token_ids;  // model_eos_token_ids (model/eos_tokens.h)
  // Structured output. Overlap: the grammar masks of a pass are computed on a worker thread
  // while its forward runs, and reach the device after it (--disable-overlap-grammar-masks:
  // before the pass, on the scheduler thread, sent with it). Jump-forward
  // (--enable-jump-forward): where the grammar forces the next bytes, they are appended as
  // tokens without drawing them (re-tokenized with the token just drawn, see
  // scheduler_draws.cpp) and computed in the next pass as an extend; needs set_retokenizer().
  bool overlap_grammar_masks = true;
  bool enable_jump_forward = false;
  // A pass that returns prompt logits (prompt logprobs) computes the logits of all its rows:
  // its tokens are cut so that they take at most this many bytes ([tokens, vocab] f32).
  int64_t max_prompt_logits_bytes = int64_t{256} << 20;
  // Micro-batches in flight (SGLang's pipeline event loop): each step launches a pass over at
  // most 1/M of the live requests, and a pass's draws are taken only once M passes are out (or
  // nothing else can run), so that under a pipeline stage k computes micro-batch m while stage
  // k+1 computes m-1. A request is in one pass at a time. With one process the passes simply
  // take turns (the same batches as a pipeline of M stages: tests compare the two bit for bit).
  int micro_batches = 1;
};

struct ServeRequest {
  std::vector<int> input_ids;
  SamplingParams sampling;
  int top_logprobs = -1;  // -1: no logprobs; 0: the chosen token's; k: also the k most likely
  std::vector<std::string> stop_strings;  // matched on the decoded output text
  bool skip_special_tokens = true;        // of that text (and of the server's)
  bool return_logits = false;  // the full logits row behind each token (tests, debugging)
  // Prompt logprobs (SGLang's logprob_start_len, OpenAI's echo): the log-softmax of each prompt
  // position's logits at the next prompt token, for the prompt tokens from this position on
  // (-1: none; the first prompt token has none, nothing predicts it), with the
  // prompt_top_logprobs most likely tokens at each position. Such a request takes no prefix
  // cache hit over those positions: tokens served from the cache have no logits.
  int prompt_logprobs_from = -1;
  int prompt_top_logprobs = 0;
  // Structured output: every draw is masked to the tokens the grammar allows next (stop
  // tokens only once it accepts), and the request stops when the grammar can only stop.
  std::shared_ptr<grammar::CompiledGrammar> grammar;
};

// What one step produced for one request: its new tokens, and whether it is done.
struct RequestOutput {
  uint64_t id = 0;
  std::vector<int> token_ids;
  std::vector<TokenLogprob> logprobs;  // one per token when asked for
  // Prompt tokens max(prompt_logprobs_from, 1) .. end, in order, each once: all come with the
  // request's first output (its prefill passes return none).
  std::vector<TokenLogprob> prompt_logprobs;
  std::vector<std::vector<float>> logits;  // one row per token with return_logits
  bool finished = false;
  std::string finish_reason;  // "stop" | "length" | "abort" | "error"
  // finish_reason "error": the RequestError raised while the request ran (the server answers it
  // as a 4xx); the engine and the other requests carry on.
  std::string error;
  bool error_retryable = false;  // refused for now (the server is stopping): a 503
  int matched_stop_token = -1;
  std::string matched_stop_string;
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

struct SchedulerStats {
  int running = 0, waiting = 0;
  int64_t total_pages = 0, used_pages = 0, cached_pages = 0, page_size = 1;
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
  int64_t retractions = 0, forward_passes = 0;
  // Tokens jump-forward appended without a draw (beyond the drawn token each run replaced).
  int64_t jump_forward_tokens = 0;
  // Host time spent computing grammar masks, and the part of it passes waited for: all of it
  // when masks are computed before the pass, what the forward did not cover with overlap.
  double grammar_mask_ms = 0, grammar_mask_exposed_ms = 0;
  // Recurrent-state pool (hybrid models): slots in all, held (by requests or the cache), and
  // held by the prefix cache as snapshots.
  int64_t state_slots = 0, used_state_slots = 0, cached_state_slots = 0;
  double new_token_ratio = 0;
  // Under a pipeline: the seconds this stage spent blocked on the transport (receiving a hidden
  // state or the draws, handing a hidden state over): the pipeline's bubbles as it sees them.
  double pipeline_wait_s = 0;
  int micro_batches = 1, passes_in_flight = 0;
  // Serving under a pipeline: every stage's own view, stage 0's now and the others' as they
  // last reported it (the engine fills it in from StepRelay; empty in one process).
  struct Stage {
    double wait_s = 0;  // its pipeline_wait_s
    int64_t used_pages = 0, used_state_slots = 0;
    int running = 0;
    int64_t forward_passes = 0;  // the same on every stage once the report is current
  };
  std::vector<Stage> stages;
};

class Scheduler {
 public:
  Scheduler(ModelRunner& runner, const SchedulerOptions& options);
  ~Scheduler();

  // Checks a request against the model and the memory (RequestError naming the problem).
  // Only reads what never changes: safe from any thread.
  void validate(const ServeRequest& r) const;
  void submit(uint64_t id, ServeRequest r);
  // Ends a waiting or running request, freeing all it holds; its output says "abort".
  void abort(uint64_t id);
  bool has_work() const {
    return !waiting_.empty() || !running_.empty() || !pending_.empty() || !in_flight_.empty();
  }
  std::vector<RequestOutput> step();
  // Empties the prefix cache; false when requests are in flight (nothing changes then).
  bool flush_cache();
  SchedulerStats stats() const;
  // Makes the text stream of a request's output (argument: skip_special_tokens), for stop
  // strings; without it requests with stop strings are refused.
  using TextStreamFactory = std::function<std::unique_ptr<TextStream>(bool)>;
  void set_detokenizer(TextStreamFactory make_text_stream) {
    make_text_stream_ = std::move(make_text_stream);
  }
  // Tokenizes text (no special tokens added) for jump-forward; may throw RequestError for
  // text it cannot encode (not UTF-8: no jump then). Without it, jump-forward does nothing.
  using Retokenizer = std::function<std::vector<int>(const std::string&)>;
  void set_retokenizer(Retokenizer retokenize) { retokenize_ = std::move(retokenize); }
  // Pipeline parallelism (strata serve --pp-size N): this scheduler runs on one stage and
  // every other stage runs one like it in lockstep (same submissions, aborts and steps, so
  // the same batches); each pass goes through all stages over `transport` and every stage
  // accepts the ids the last stage drew. The logprobs, raw logits and prompt logits rows go
  // only to `answer_rank`, the stage whose outputs are delivered (serve: 0, where the server
  // runs; generate: the last, which prints); the other stages' outputs lack them. Requests with
  // a grammar are refused in validate() (masks are not carried). Set before the first submit.
  void set_pipeline(Transport* transport, int answer_rank) {
    pipeline_ = transport;
    answer_rank_ = answer_rank;
  }
  const ModelRunner& runner() const { return runner_; }
  // The most tokens (prompt + output) one request may hold: the context length, or the whole
  // KV cache when that is smaller.
  int64_t max_request_tokens() const;

 private:
  struct Req;
  // A pass launched and not yet taken: its batch, its members by id (one aborted meanwhile is
  // gone when the pass is taken, and skipped), and the draws once they are here.
  struct PromptRow {
    int member;  // index into the pass's members
    int position;
  };
  struct InFlight {
    ForwardBatch batch;
    std::vector<uint64_t> members;
    std::vector<PromptRow> prompt_rows;
    ModelRunner::SampledTokens drawn;
    bool drawn_here = false;  // one process, or the last stage: drawn at launch
  };
  // The next pass's batch over the requests not in flight (at most 1/M of the live ones);
  // returns its members, none when nothing can run now.
  std::vector<Req*> build_batch(ForwardBatch& batch);
  void launch(ForwardBatch batch, const std::vector<Req*>& members);
  // Takes the oldest pass's draws (waiting for them under a pipeline) and applies them.
  void take_oldest_pass();
  // Whether this process records logprobs, raw logits and prompt logprobs (set_pipeline).
  bool records_draws() const { return !pipeline_ || pipeline_->rank() == answer_rank_; }
  int64_t available_pages() const;
  bool reserve_pages(const Req& r, int n);
  int try_admit(Req& r, int budget, ForwardBatch& batch, std::vector<Req*>& members);
  void retract_until_decode_fits();
  // What r's next draw needs in the pass: its sampling row, logit edits, logprobs, raw row,
  // and its grammar mask: in the batch, or with overlap a row of `late` (and late_reqs_).
  void add_draw(ForwardBatch& batch, const Req& r, ModelRunner::LateMasks& late);
  // r's grammar mask (r has a grammar): token_mask_words(vocab) words at `out`.
  void grammar_mask(const Req& r, uint64_t* out) const;
  // The pass, with the late masks computed on mask_worker_ while its forward runs. Under a
  // pipeline this stage's part of it: `drawn_here` says whether the draws came with it.
  ModelRunner::SampledTokens run_sampled(const ForwardBatch& batch, ModelRunner::LateMasks& late,
                                         bool* drawn_here);
  // Jump-forward: what replaces `token`, just drawn for r (itself when nothing is forced).
  std::vector<int> jump_forward(const Req& r, int token) const;
  // Records the token the pass drew for r (row b), its logprobs and raw logits if asked for,
  // then accept()s it.
  void take_draw(Req& r, int b, const ForwardBatch& batch, ModelRunner::SampledTokens& drawn);
  // Prompt logprobs: asks the pass for the logits rows of the prompt positions whose logprobs
  // members still owe (batch.logits_rows), and records them from the pass's rows (members that
  // were aborted meanwhile are null).
  std::vector<PromptRow> ask_prompt_logits(ForwardBatch& batch, const std::vector<Req*>& members);
  void take_prompt_logprobs(const std::vector<PromptRow>& rows, const std::vector<Req*>& members,
                            const ModelRunner::SampledTokens& drawn);
  // Appends a chosen token to r and finishes r at a stop token, stop string or length.
  void accept(Req& r, int token);
  bool matches_stop_string(Req& r, int token);
  void share_prompt(Req& r);
  void relock(Req& r, int len);
  // Hybrid models with the prefix cache.
  bool caches_states() const { return cache_ && states_; }
  int prefill_chunk(const Req& r, int budget) const;
  bool at_checkpoint(const Req& r) const;
  int take_state_slot(const RadixCache::Node* keep, bool zeroed);
  void checkpoint(Req& r);
  void track_decode(Req& r);
  void cache_final_state(Req& r);
  void finish(Req& r, const std::string& reason);
  void fail_request(Req& r, const std::string& message);
  void retract(std::unique_ptr<Req> r);
  void release(Req& r);
  RequestOutput take_output(Req& r);

  ModelRunner& runner_;
  SchedulerOptions options_;
  TokenMemory& memory_;
  std::unique_ptr<RadixCache> cache_;  // null with --disable-radix-cache
  TextStreamFactory make_text_stream_;
  Retokenizer retokenize_;
  Transport* pipeline_ = nullptr;  // set_pipeline
  int answer_rank_ = 0;
  std::deque<InFlight> in_flight_;  // oldest first
  // Overlap: the worker, the requests whose masks the pass needs, and the masks it computes.
  std::unique_ptr<MaskWorker> mask_worker_;
  std::vector<const Req*> late_reqs_;
  std::vector<uint64_t> late_masks_;
  double late_job_ms_ = 0;  // written by the job, read after wait()
  StatePool* states_;       // the runner's recurrent-state pool; null: no such layers
  int page_size_;
  bool extra_buffer_ = false;  // --mamba-radix-cache-strategy extra_buffer
  int track_interval_ = 0;     // --mamba-track-interval
  std::deque<std::unique_ptr<Req>> waiting_;
  std::vector<std::unique_ptr<Req>> running_;  // in admission order
  std::vector<std::unique_ptr<Req>> pending_;  // finished, their last output not yet returned
  uint64_t admissions_ = 0;
  // Requests finished so far: a retracted request is admitted again only after one more has
  // finished (or nothing runs), so that it never re-enters the shortage that retracted it.
  uint64_t completions_ = 0;
  double new_token_ratio_;
  SchedulerStats totals_;
};

}  // namespace strata
