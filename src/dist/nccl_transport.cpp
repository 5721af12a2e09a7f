#include "dist/nccl_transport.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kHiddenSlots = 4;  // hidden states in flight per link
constexpr size_t kIdsSlots = 8;     // id lists in flight per link

[[noreturn]] void timed_out(int rank, int peer, const char* what, double seconds) {
  fail(
      "process {} waited {} s for process {} ({}); that process is hung or dead, or the step "
      "takes longer than --pp-timeout allows",
      rank, seconds, peer, what);
}

void backoff(int& polls) {
  if (++polls < 256) return;
  if (polls < 4096)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace

NcclTransport::NcclTransport(MpiTransport& control, int gpu, double timeout_seconds)
    : control_(control), gpu_(gpu), timeout_s_(timeout_seconds) {
  STRATA_CUDA_CHECK(cudaSetDevice(gpu));
  const int n = control.size(), me = control.rank(), last = n - 1;
  // Links in one global order: hidden states k -> k+1, then ids last -> k. Process 0 makes
  // every link's unique id and broadcasts them over MPI.
  struct Planned {
    Kind kind;
    int from, to;
  };
  std::vector<Planned> plan;
  for (int k = 0; k + 1 < n; ++k) plan.push_back({Kind::Hidden, k, k + 1});
  for (int k = 0; k < last; ++k) plan.push_back({Kind::Ids, last, k});
  std::vector<char> ids(plan.size() * sizeof(ncclUniqueId));
  if (me == 0)
    for (size_t i = 0; i < plan.size(); ++i) {
      ncclUniqueId id;
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) fail("ncclGetUniqueId failed: {}", ncclGetErrorString(r));
      std::memcpy(ids.data() + i * sizeof(ncclUniqueId), &id, sizeof(id));
    }
  control.broadcast(0, ids);

  try {
    // Start every communicator of this process (non-blocking: they connect in the background),
    // then wait for each.
    std::vector<ncclResult_t> started;
    for (size_t i = 0; i < plan.size(); ++i) {
      const Planned& p = plan[i];
      if (p.from != me && p.to != me) continue;
      auto l = std::make_unique<Link>();
      l->kind = p.kind;
      l->sends = p.from == me;
      l->peer = l->sends ? p.to : p.from;
      l->slots.resize(p.kind == Kind::Hidden ? kHiddenSlots : kIdsSlots);
      STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking));
      for (Slot& s : l->slots) {
        STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming));
        STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
      }
      ncclUniqueId id;
      std::memcpy(&id, ids.data() + i * sizeof(ncclUniqueId), sizeof(id));
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      started.push_back(ncclCommInitRankConfig(&l->comm, 2, id, l->sends ? 0 : 1, &config));
      links_.push_back(std::move(l));
    }
    for (size_t i = 0; i < links_.size(); ++i)
      settle(*links_[i], started[i], "setting up the communicator");
    // One message over every link, in the global order on both ends: the peers connect now,
    // and a link that cannot carry data fails at start-up rather than mid-generation.
    cuda::DeviceBuffer probe(sizeof(int32_t) * links_.size());
    STRATA_CUDA_CHECK(cudaMemset(probe.data(), 0, probe.bytes()));
    for (size_t i = 0; i < links_.size(); ++i) {
      Link& l = *links_[i];
      int32_t* p = probe.as<int32_t>() + i;
      settle(l,
             l.sends ? ncclSend(p, 1, ncclInt32, 1, l.comm, l.stream)
                     : ncclRecv(p, 1, ncclInt32, 0, l.comm, l.stream),
             "connecting");
      STRATA_CUDA_CHECK(cudaEventRecord(l.slots[0].done, l.stream));
    }
    for (auto& l : links_) wait(l->slots[0].done, *l, "connecting over NCCL");
  } catch (...) {
    destroy_links(false);
    throw;
  }
}

NcclTransport::~NcclTransport() {
  destroy_links(true);
}

void NcclTransport::destroy_links(bool graceful) {
  for (auto& l : links_) {
    if (l->comm && !graceful) {
      ncclCommAbort(l->comm);
      l->comm = nullptr;
    }
    if (l->comm) {
      // Finalize (flushes what is queued), bounded; a communicator that does not finish in
      // time is aborted instead.
      ncclResult_t state = ncclCommFinalize(l->comm);
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      int polls = 0;
      while (state == ncclInProgress && Clock::now() < deadline) {
        backoff(polls);
        ncclCommGetAsyncError(l->comm, &state);
      }
      if (state == ncclSuccess)
        ncclCommDestroy(l->comm);
      else
        ncclCommAbort(l->comm);
      l->comm = nullptr;
    }
    for (Slot& s : l->slots) {
      if (s.host) cudaFreeHost(s.host);
      if (s.ready) cudaEventDestroy(s.ready);
      if (s.done) cudaEventDestroy(s.done);
    }
    l->slots.clear();
    if (l->stream) cudaStreamDestroy(l->stream);
  }
  links_.clear();
}

void NcclTransport::set_timeout(double seconds) {
  timeout_s_ = seconds;
  control_.set_timeout(seconds);
}

NcclTransport::Link& NcclTransport::link(Kind kind, bool sends, int peer) {
  for (auto& l : links_)
    if (l->kind == kind && l->sends == sends && l->peer == peer) return *l;
  fail("process {} has no NCCL link {} process {} for {}", rank(), sends ? "to" : "from", peer,
       kind == Kind::Hidden ? "hidden states" : "token ids");
}

void NcclTransport::settle(Link& l, ncclResult_t result, const char* what) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s_));
  int polls = 0;
  while (result == ncclInProgress) {
    if (Clock::now() > deadline) timed_out(rank(), l.peer, what, timeout_s_);
    backoff(polls);
    if (ncclCommGetAsyncError(l.comm, &result) != ncclSuccess) break;
  }
  if (result != ncclSuccess) {
    const char* detail = l.comm ? ncclGetLastError(l.comm) : "";
    fail("NCCL failed {} with process {}: {}{}{}", what, l.peer, ncclGetErrorString(result),
         detail && *detail ? ": " : "", detail ? detail : "");
  }
}

void NcclTransport::check_communicators() const {
  for (const auto& l : links_) {
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(l->comm, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      const char* detail = ncclGetLastError(l->comm);
      fail("NCCL reports an error on the link with process {}: {}{}{}", l->peer,
           ncclGetErrorString(state), detail && *detail ? ": " : "", detail ? detail : "");
    }
  }
}

void NcclTransport::wait(cudaEvent_t event, const Link& l, const char* what) {
  if (!cuda::wait_event(event, timeout_s_, [this] { check_communicators(); }))
    timed_out(rank(), l.peer, what, timeout_s_);
}

void NcclTransport::reserve(int64_t max_tensor_elements, int max_ids) {
  for (auto& l : links_) {
    const size_t bytes = l->kind == Kind::Hidden
                             ? static_cast<size_t>(max_tensor_elements) * sizeof(float)
                             : static_cast<size_t>(max_ids) * sizeof(int32_t);
    if (bytes <= l->capacity) continue;
    // Nothing is in flight yet (the probe was waited for), so buffers may still be replaced.
    for (Slot& s : l->slots) {
      if (s.used) wait(s.done, *l, "finishing a hand-over before resizing");
      s.buffer = cuda::DeviceBuffer(bytes);
      if (l->kind == Kind::Ids) {
        if (s.host) STRATA_CUDA_CHECK(cudaFreeHost(s.host));
        s.host = nullptr;
        STRATA_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.host), bytes));
      }
    }
    l->capacity = bytes;
  }
}

void NcclTransport::send_tensor(int peer, const TensorRef& tensor) {
  STRATA_CHECK(tensor.memory == Memory::Device, "the NCCL transport sends GPU tensors, not {}",
               to_string(tensor.memory));
  STRATA_CHECK(compute_ != nullptr, "NCCL hand-over before set_stream");
  Link& l = link(Kind::Hidden, true, peer);
  STRATA_CHECK(tensor.bytes() <= l.capacity, "a tensor of {} bytes over the {} reserved",
               tensor.bytes(), l.capacity);
  Slot& s = l.take();
  // The slot's last send must have read it before the compute stream overwrites it.
  if (s.used) STRATA_CUDA_CHECK(cudaStreamWaitEvent(compute_, s.done, 0));
  STRATA_CUDA_CHECK(cudaMemcpyAsync(s.buffer.data(), tensor.data, tensor.bytes(),
                                    cudaMemcpyDeviceToDevice, compute_));
  STRATA_CUDA_CHECK(cudaEventRecord(s.ready, compute_));
  STRATA_CUDA_CHECK(cudaStreamWaitEvent(l.stream, s.ready, 0));
  settle(l,
         ncclSend(s.buffer.data(), static_cast<size_t>(tensor.numel()), ncclFloat32, 1, l.comm,
                  l.stream),
         "sending a hidden state");
  STRATA_CUDA_CHECK(cudaEventRecord(s.done, l.stream));
  s.used = true;
}

void NcclTransport::recv_tensor(int peer, const TensorRef& tensor) {
  STRATA_CHECK(tensor.memory == Memory::Device,
               "the NCCL transport receives into GPU memory, not {}", to_string(tensor.memory));
  STRATA_CHECK(compute_ != nullptr, "NCCL hand-over before set_stream");
  Link& l = link(Kind::Hidden, false, peer);
  STRATA_CHECK(tensor.bytes() <= l.capacity, "a tensor of {} bytes over the {} reserved",
               tensor.bytes(), l.capacity);
  Slot& s = l.take();
  // The compute stream must have copied the slot's last tensor out before it is refilled.
  if (s.used) STRATA_CUDA_CHECK(cudaStreamWaitEvent(l.stream, s.done, 0));
  settle(l,
         ncclRecv(s.buffer.data(), static_cast<size_t>(tensor.numel()), ncclFloat32, 0, l.comm,
                  l.stream),
         "receiving a hidden state");
  STRATA_CUDA_CHECK(cudaEventRecord(s.ready, l.stream));
  STRATA_CUDA_CHECK(cudaStreamWaitEvent(compute_, s.ready, 0));
  STRATA_CUDA_CHECK(cudaMemcpyAsync(tensor.data, s.buffer.data(), tensor.bytes(),
                                    cudaMemcpyDeviceToDevice, compute_));
  STRATA_CUDA_CHECK(cudaEventRecord(s.done, compute_));
  s.used = true;
}

void NcclTransport::post_ids(int peer, std::vector<int32_t> ids) {
  Link& l = link(Kind::Ids, true, peer);
  const size_t bytes = ids.size() * sizeof(int32_t);
  STRATA_CHECK(bytes <= l.capacity, "{} ids over the {} bytes reserved", ids.size(), l.capacity);
  Slot& s = l.take();
  // The host writes the slot's pinned buffer: its last send must be over (in order, the
  // receiver takes that one first, so this wait ends once it caught up).
  if (s.used) wait(s.done, l, "delivering earlier token ids");
  if (bytes) std::memcpy(s.host, ids.data(), bytes);
  STRATA_CUDA_CHECK(
      cudaMemcpyAsync(s.buffer.data(), s.host, bytes, cudaMemcpyHostToDevice, l.stream));
  settle(l, ncclSend(s.buffer.data(), ids.size(), ncclInt32, 1, l.comm, l.stream),
         "sending token ids");
  STRATA_CUDA_CHECK(cudaEventRecord(s.done, l.stream));
  s.used = true;
}

std::vector<int32_t> NcclTransport::recv_ids(int peer, int count) {
  Link& l = link(Kind::Ids, false, peer);
  const size_t bytes = static_cast<size_t>(count) * sizeof(int32_t);
  STRATA_CHECK(bytes <= l.capacity, "{} ids over the {} bytes reserved", count, l.capacity);
  Slot& s = l.slots[0];  // waited for below: one slot is enough
  settle(l, ncclRecv(s.buffer.data(), count, ncclInt32, 0, l.comm, l.stream),
         "receiving token ids");
  STRATA_CUDA_CHECK(
      cudaMemcpyAsync(s.host, s.buffer.data(), bytes, cudaMemcpyDeviceToHost, l.stream));
  STRATA_CUDA_CHECK(cudaEventRecord(s.done, l.stream));
  wait(s.done, l, "waiting for token ids");
  return std::vector<int32_t>(s.host, s.host + count);
}

void NcclTransport::flush() {
  for (auto& l : links_)
    for (Slot& s : l->slots)
      if (s.used) wait(s.done, *l, l->sends ? "delivering a hand-over" : "taking a hand-over");
}

void NcclTransport::abort(int code) {
  // ncclCommAbort releases transfers that wait on a dead peer. It runs on a thread of its own
  // with a deadline: MPI_Abort must come in bounded time even if the driver is wedged.
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::vector<ncclComm_t> comms;
  for (auto& l : links_) comms.push_back(l->comm);
  std::thread([comms, finished] {
    for (ncclComm_t c : comms)
      if (c) ncclCommAbort(c);
    finished->store(true);
  }).detach();
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!finished->load() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  control_.abort(code);
  std::_Exit(code);  // not reached: keeps [[noreturn]] honest
}

}  // namespace strata
