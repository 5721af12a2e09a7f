#include "dist/mpi_transport.h"

// Only MPI's C API: the deprecated C++ bindings would need libmpi_cxx at link time.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "model/shard.h"

namespace strata {

namespace {

// One tag per kind of message, so a tensor is never matched by a receive for ids.
constexpr int kTagTensor = 1;
constexpr int kTagIds = 2;
constexpr int kTagControl = 3;

using Clock = std::chrono::steady_clock;

// Backs off while polling: spin briefly (a pipeline hand-over is usually imminent), then
// yield, then sleep, so a waiting stage leaves the cores to the stages that compute.
void backoff(int& polls) {
  ++polls;
  if (polls < 64) return;
  if (polls < 2048)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}

Clock::time_point deadline_after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

MPI_Comm comm_of(int handle) {
  return MPI_Comm_f2c(handle);
}

[[noreturn]] void timed_out(int rank, int peer, const char* what, double seconds) {
  if (peer < 0)
    fail(
        "process {} waited {} s at {}; another process is hung or dead, or takes longer than "
        "--pp-timeout allows",
        rank, seconds, what);
  fail(
      "process {} waited {} s for process {} ({}); that process is hung or dead, or the step "
      "takes longer than --pp-timeout allows",
      rank, seconds, peer, what);
}

// Polls `request` until it completes; Error after `timeout_s`. `what` names the wait.
void wait_for(MPI_Request* request, double timeout_s, int rank, int peer, const char* what) {
  const auto deadline = deadline_after(timeout_s);
  int polls = 0;
  for (;;) {
    int done = 0;
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (Clock::now() > deadline) timed_out(rank, peer, what, timeout_s);
    backoff(polls);
  }
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

MpiCommunicator::MpiCommunicator(int comm_handle, double timeout_seconds)
    : comm_(comm_handle), timeout_s_(timeout_seconds) {
  MPI_Comm_rank(comm_of(comm_), &rank_);
  MPI_Comm_size(comm_of(comm_), &size_);
}

void MpiCommunicator::all_reduce_sum(Tensor& t) {
  const auto start = Clock::now();
  const int64_t rows = t.rows(), cols = t.cols(), n = rows * cols;
  STRATA_CHECK(n < (int64_t{1} << 31), "all-reduce of {} elements", n);
  float* data = t.data();
  if (!t.contiguous()) {
    staging_.resize(n);
    for (int64_t r = 0; r < rows; ++r) std::memcpy(&staging_[r * cols], t.row(r), cols * 4);
    data = staging_.data();
  }
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_of(comm_),
                 &request);
  wait_for(&request, timeout_s_, rank_, -1, "a tensor-parallel all-reduce");
  if (!t.contiguous())
    for (int64_t r = 0; r < rows; ++r) std::memcpy(t.row(r), &staging_[r * cols], cols * 4);
  seconds_ += seconds_since(start);
  ++calls_;
}

// Rank r's part travels as one block [rows, its columns]; the blocks arrive one after the
// other and are laid side by side into out's rows.
void MpiCommunicator::all_gather_cols(const Tensor& part, Tensor& out) {
  const auto start = Clock::now();
  const int64_t rows = out.rows(), cols = out.cols();
  const Shard mine{rank_, size_};
  STRATA_CHECK(part.rows() == rows && part.cols() == mine.size(cols),
               "rank {} of {} gathers {} into {}", rank_, size_, part.describe(), out.describe());
  STRATA_CHECK(rows * cols < (int64_t{1} << 31), "all-gather of {} elements", rows * cols);
  std::vector<int> counts(size_), offsets(size_);
  for (int r = 0; r < size_; ++r) {
    counts[r] = static_cast<int>(rows * Shard{r, size_}.size(cols));
    offsets[r] = static_cast<int>(rows * Shard{r, size_}.begin(cols));
  }
  staging_.resize(rows * cols + counts[rank_]);
  float* send = staging_.data() + rows * cols;
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(send + r * part.cols(), part.row(r), part.cols() * 4);
  MPI_Request request;
  MPI_Iallgatherv(send, counts[rank_], MPI_FLOAT, staging_.data(), counts.data(), offsets.data(),
                  MPI_FLOAT, comm_of(comm_), &request);
  wait_for(&request, timeout_s_, rank_, -1, "a tensor-parallel all-gather");
  for (int q = 0; q < size_; ++q) {
    const int64_t begin = Shard{q, size_}.begin(cols), width = Shard{q, size_}.size(cols);
    const float* block = staging_.data() + offsets[q];
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out.row(r) + begin, block + r * width, width * 4);
  }
  seconds_ += seconds_since(start);
  ++calls_;
}

int64_t MpiCommunicator::min_over_ranks(int64_t value) {
  int64_t least = value;
  MPI_Request request;
  MPI_Iallreduce(&value, &least, 1, MPI_INT64_T, MPI_MIN, comm_of(comm_), &request);
  wait_for(&request, timeout_s_, rank_, -1, "a tensor-parallel agreement (the ranks' cache sizes)");
  return least;
}

void MpiCommunicator::broadcast(int root, std::vector<char>& bytes) {
  STRATA_CHECK(bytes.size() < (size_t{1} << 31), "broadcast of {} bytes", bytes.size());
  MPI_Request request;
  MPI_Ibcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, root, comm_of(comm_),
             &request);
  wait_for(&request, timeout_s_, rank_, root, "a broadcast from tensor-parallel rank 0");
}

struct MpiTransport::Posted {
  MPI_Request request = MPI_REQUEST_NULL;
  int peer = -1;
  std::vector<int32_t> ids;
  std::string bytes;  // a control message (ids empty)
};

MpiTransport::MpiTransport(double timeout_seconds, bool serialized, int tp_size)
    : timeout_s_(timeout_seconds), tp_size_(tp_size) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  STRATA_CHECK(!initialized, "MPI initialized twice");
  int provided = 0;
  // FUNNELED: only the main thread calls MPI; OpenMP threads only compute. A server's engine
  // thread is not the main thread: SERIALIZED lets it call MPI (never two threads at once).
  const int wanted = serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED;
  MPI_Init_thread(nullptr, nullptr, wanted, &provided);
  if (provided < wanted)
    fail(
        "this MPI library gives thread support level {} but the pipeline needs {} "
        "(MPI_THREAD_SERIALIZED: the server's engine thread calls MPI); use an OpenMPI built "
        "with thread support",
        provided, wanted);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  const int world_rank = world_rank_;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_free(&local);
  rank_ = world_rank;  // for the error below, should it come
  if (tp_size_ < 1 || world_size_ % tp_size_ != 0)
    fail(
        "this MPI job has {} processes, not a multiple of --tp-size {}; start it with mpirun -np "
        "(--pp-size x --tp-size)",
        world_size_, tp_size_);
  // The grid: world rank = pp_rank * tp_size + tp_rank. Stages of one tp_rank talk through
  // this transport; the ranks of one stage form its tensor-parallel group.
  tp_rank_ = world_rank % tp_size_;
  const int pp_rank = world_rank / tp_size_;
  MPI_Comm pipeline, tensor, control;
  MPI_Comm_dup(MPI_COMM_WORLD, &control);
  control_comm_ = MPI_Comm_c2f(control);
  MPI_Comm_split(MPI_COMM_WORLD, tp_rank_, pp_rank, &pipeline);
  MPI_Comm_split(MPI_COMM_WORLD, pp_rank, tp_rank_, &tensor);
  pipeline_comm_ = MPI_Comm_c2f(pipeline);
  tensor_comm_ = MPI_Comm_c2f(tensor);
  MPI_Comm_rank(pipeline, &rank_);
  MPI_Comm_size(pipeline, &size_);
  tensor_group_ = std::make_unique<MpiCommunicator>(tensor_comm_, timeout_s_);
}

MpiTransport::~MpiTransport() {
  try {
    flush();
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    abort(1);
  }
  tensor_group_.reset();
  MPI_Comm pipeline = comm_of(pipeline_comm_), tensor = comm_of(tensor_comm_),
           control = comm_of(control_comm_);
  MPI_Comm_free(&pipeline);
  MPI_Comm_free(&tensor);
  MPI_Comm_free(&control);
  MPI_Finalize();
}

void MpiTransport::wait(void* request, int peer, const char* what) {
  wait_for(static_cast<MPI_Request*>(request), timeout_s_, rank_, peer, what);
}

std::vector<char> MpiTransport::receive_bytes(int peer, int tag, const char* what) {
  return receive_bytes_on(pipeline_comm_, rank_, peer, tag, what);
}

std::vector<char> MpiTransport::receive_bytes_on(int comm, int self, int peer, int tag,
                                                 const char* what) {
  reap_posted();
  const auto deadline = deadline_after(timeout_s_);
  int polls = 0;
  MPI_Message message;
  MPI_Status status;
  for (;;) {
    int found = 0;
    MPI_Improbe(peer, tag, comm_of(comm), &found, &message, &status);
    if (found) break;
    if (Clock::now() > deadline) timed_out(self, peer, what, timeout_s_);
    backoff(polls);
  }
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  std::vector<char> buffer(bytes);
  MPI_Request request;
  MPI_Imrecv(buffer.data(), bytes, MPI_BYTE, &message, &request);
  wait_for(&request, timeout_s_, self, peer, what);
  return buffer;
}

// A tensor travels as one message: [ndim, dims..., data] (int64 header, f32 data).
void MpiTransport::send_tensor(int peer, const TensorRef& tensor) {
  STRATA_CHECK(tensor.memory == Memory::Host, "the MPI transport sends host tensors, not {}",
               to_string(tensor.memory));
  reap_posted();
  const auto& shape = tensor.shape;
  const size_t header = sizeof(int64_t) * (1 + shape.size());
  const size_t data = tensor.bytes();
  std::vector<char> buffer(header + data);
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::memcpy(buffer.data(), &ndim, sizeof(int64_t));
  std::memcpy(buffer.data() + sizeof(int64_t), shape.data(), sizeof(int64_t) * shape.size());
  if (data) std::memcpy(buffer.data() + header, tensor.data, data);
  STRATA_CHECK(buffer.size() < (size_t{1} << 31), "tensor {} is too large for one MPI message",
               shape_to_string(shape));
  MPI_Request request;
  MPI_Issend(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, peer, kTagTensor,
             comm_of(pipeline_comm_), &request);
  wait(&request, peer, "handing over a tensor");
}

void MpiTransport::recv_tensor(int peer, const TensorRef& tensor) {
  STRATA_CHECK(tensor.memory == Memory::Host, "the MPI transport receives into host memory, not {}",
               to_string(tensor.memory));
  const std::vector<char> buffer = receive_bytes(peer, kTagTensor, "waiting for a tensor");
  int64_t ndim = 0;
  STRATA_CHECK(buffer.size() >= sizeof(int64_t), "tensor message of {} bytes", buffer.size());
  std::memcpy(&ndim, buffer.data(), sizeof(int64_t));
  const size_t header = sizeof(int64_t) * (1 + ndim);
  STRATA_CHECK(ndim >= 0 && ndim <= 8 && buffer.size() >= header, "tensor message with {} dims",
               ndim);
  std::vector<int64_t> shape(ndim);
  std::memcpy(shape.data(), buffer.data() + sizeof(int64_t), sizeof(int64_t) * ndim);
  if (shape != tensor.shape)
    fail(
        "pipeline stages disagree: process {} expected a tensor of shape {} from process {} but "
        "received {}; every stage must run the same build with the same flags and prompts",
        rank_, shape_to_string(tensor.shape), peer, shape_to_string(shape));
  STRATA_CHECK(buffer.size() == header + tensor.bytes(), "tensor {} in a message of {} bytes",
               shape_to_string(shape), buffer.size());
  if (tensor.bytes()) std::memcpy(tensor.data, buffer.data() + header, tensor.bytes());
}

void MpiTransport::post_ids(int peer, std::vector<int32_t> ids) {
  reap_posted();
  auto posted = std::make_unique<Posted>();
  posted->peer = peer;
  posted->ids = std::move(ids);
  MPI_Isend(posted->ids.data(), static_cast<int>(posted->ids.size()), MPI_INT32_T, peer, kTagIds,
            comm_of(pipeline_comm_), &posted->request);
  posted_.push_back(std::move(posted));
}

std::vector<int32_t> MpiTransport::recv_ids(int peer, int count) {
  const std::vector<char> buffer = receive_bytes(peer, kTagIds, "waiting for token ids");
  std::vector<int32_t> ids(buffer.size() / sizeof(int32_t));
  if (static_cast<int>(ids.size()) != count)
    fail(
        "pipeline stages disagree: process {} expected {} token ids from process {} but received "
        "{}; every stage must run the same build with the same flags and prompts",
        rank_, count, peer, ids.size());
  if (!ids.empty()) std::memcpy(ids.data(), buffer.data(), buffer.size());
  return ids;
}

void MpiTransport::post_message(int peer, std::string bytes) {
  reap_posted();
  STRATA_CHECK(bytes.size() < (size_t{1} << 31), "control message of {} bytes", bytes.size());
  auto posted = std::make_unique<Posted>();
  posted->peer = peer;
  posted->bytes = std::move(bytes);
  MPI_Isend(posted->bytes.data(), static_cast<int>(posted->bytes.size()), MPI_BYTE, peer,
            kTagControl, comm_of(control_comm_), &posted->request);
  posted_.push_back(std::move(posted));
}

std::string MpiTransport::recv_message(int peer, const char* what) {
  const std::vector<char> buffer =
      receive_bytes_on(control_comm_, world_rank_, peer, kTagControl, what);
  return std::string(buffer.begin(), buffer.end());
}

std::optional<std::string> MpiTransport::try_recv_message(int peer) {
  int found = 0;
  MPI_Message message;
  MPI_Status status;
  MPI_Improbe(peer, kTagControl, comm_of(control_comm_), &found, &message, &status);
  if (!found) return std::nullopt;
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  std::string buffer(static_cast<size_t>(bytes), '\0');
  MPI_Request request;
  MPI_Imrecv(buffer.data(), bytes, MPI_BYTE, &message, &request);
  wait_for(&request, timeout_s_, world_rank_, peer, "a control message it had announced");
  return buffer;
}

// Frees the posted messages that have been delivered (in order; a later one may wait).
void MpiTransport::reap_posted() {
  while (!posted_.empty()) {
    int done = 0;
    MPI_Test(&posted_.front()->request, &done, MPI_STATUS_IGNORE);
    if (!done) return;
    posted_.pop_front();
  }
}

void MpiTransport::barrier() {
  MPI_Request request;
  MPI_Ibarrier(comm_of(pipeline_comm_), &request);
  wait(&request, -1, "a barrier every process must reach");
}

void MpiTransport::broadcast(int root, std::vector<char>& bytes) {
  STRATA_CHECK(bytes.size() < (size_t{1} << 31), "broadcast of {} bytes", bytes.size());
  MPI_Request request;
  MPI_Ibcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, root, comm_of(pipeline_comm_),
             &request);
  wait(&request, root, "a broadcast from process 0");
}

void MpiTransport::broadcast_to_job(std::vector<char>& bytes) {
  STRATA_CHECK(bytes.size() < (size_t{1} << 31), "broadcast of {} bytes", bytes.size());
  MPI_Request request;
  MPI_Ibcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, comm_of(control_comm_),
             &request);
  wait_for(&request, timeout_s_, world_rank_, 0, "a broadcast from process 0");
}

void MpiTransport::flush() {
  while (!posted_.empty()) {
    wait(&posted_.front()->request, posted_.front()->peer,
         "delivering posted token ids or messages");
    posted_.pop_front();
  }
}

void MpiTransport::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace strata
