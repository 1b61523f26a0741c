#include "engine/comm/in_process_communicator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "engine/comm/comm_error.h"
#include "engine/comm/thread_rendezvous.h"
#include "kernels/cuda_check.h"
#include "kernels/sum_buffers.h"

namespace sextant::engine::comm {

// What one rank posts for a collective: the others read it between the
// rendezvous that follows and the next one.
struct CollectiveSlot {
  std::string op;
  const void* send = nullptr;
  std::size_t count = 0;
  DataType type = DataType::kFp32;
  int color = 0;
  int key = 0;
};

// One send waiting for its recv.
struct InProcessMessage {
  const void* data = nullptr;
  std::size_t bytes = 0;
  cudaEvent_t ready = nullptr;     // recorded on the sender's stream: data is written
  cudaEvent_t consumed = nullptr;  // recorded on the receiver's stream: data is copied
  bool taken = false;
  std::string error;  // set by a receiver that refused the message
};

struct InProcessGroup {
  InProcessGroup(int size_, std::string name_, std::chrono::milliseconds timeout)
      : size(size_), name(std::move(name_)), rendezvous(size_, timeout), slots(size_),
        ready(size_), done(size_), split_groups(size_), split_ranks(size_) {
    for (int r = 0; r < size; ++r) {
      SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&ready[r], cudaEventDisableTiming));
      SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&done[r], cudaEventDisableTiming));
    }
  }
  ~InProcessGroup() {
    for (cudaEvent_t e : ready) cudaEventDestroy(e);
    for (cudaEvent_t e : done) cudaEventDestroy(e);
  }
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  const int size;
  const std::string name;
  ThreadRendezvous rendezvous;
  std::vector<CollectiveSlot> slots;
  std::vector<cudaEvent_t> ready;  // rank r's inputs are written
  std::vector<cudaEvent_t> done;   // rank r has read every input it needs
  // split(): rank 0 builds the new groups; rank r reads its own entry.
  std::vector<std::shared_ptr<InProcessGroup>> split_groups;
  std::vector<int> split_ranks;
  // send/recv: messages in flight, by (sender, receiver).
  std::mutex mailbox_mutex;
  std::condition_variable mailbox_changed;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<InProcessMessage>>>
      mailboxes;
};

namespace {

std::string seconds_text(std::chrono::milliseconds timeout) {
  std::ostringstream out;
  out << std::chrono::duration<double>(timeout).count() << " s";
  return out.str();
}

// Polls the stream until its work is done (true) or `timeout` passes (false);
// throws CudaError for a fault in that work.
bool wait_for_stream(cudaStream_t stream, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return true;
    if (state != cudaErrorNotReady) SEXTANT_CUDA_CHECK(state);
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// The bytes at element `offset` of a buffer of `type`.
const std::byte* at(const void* base, std::size_t offset, DataType type) {
  return static_cast<const std::byte*>(base) + offset * bytes_of(type);
}

// out (count) = the sum of inputs[j] (count each), in rank order.
void sum_into(const std::vector<const std::byte*>& inputs, void* out, std::size_t count,
              DataType type, cudaStream_t stream) {
  if (type == DataType::kBf16) {
    std::vector<const kernels::Bf16*> typed(inputs.size());
    for (std::size_t j = 0; j < inputs.size(); ++j)
      typed[j] = reinterpret_cast<const kernels::Bf16*>(inputs[j]);
    kernels::sum_buffers(typed.data(), static_cast<int>(typed.size()),
                         static_cast<kernels::Bf16*>(out), count, stream);
  } else if (type == DataType::kInt32) {
    std::vector<const std::int32_t*> typed(inputs.size());
    for (std::size_t j = 0; j < inputs.size(); ++j)
      typed[j] = reinterpret_cast<const std::int32_t*>(inputs[j]);
    kernels::sum_buffers(typed.data(), static_cast<int>(typed.size()), static_cast<std::int32_t*>(out),
                         count, stream);
  } else {
    std::vector<const float*> typed(inputs.size());
    for (std::size_t j = 0; j < inputs.size(); ++j)
      typed[j] = reinterpret_cast<const float*>(inputs[j]);
    kernels::sum_buffers(typed.data(), static_cast<int>(typed.size()), static_cast<float*>(out),
                         count, stream);
  }
}

// Runs one collective on this rank's stream once meet() has returned: waits
// for every rank's inputs, lets `produce` write this rank's result into
// scratch (`out_bytes`), waits until every rank has read its inputs (the
// rendezvous `wait_all`), then copies the result to `recv`.
void produce_and_deliver(InProcessGroup& g, int rank, cudaStream_t stream, void* recv,
                         std::size_t out_bytes, const std::function<void(std::byte*)>& produce,
                         const std::function<void()>& wait_all) {
  for (int j = 0; j < g.size; ++j) SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream, g.ready[j], 0));
  void* scratch = nullptr;
  if (out_bytes > 0) SEXTANT_CUDA_CHECK(cudaMallocAsync(&scratch, out_bytes, stream));
  if (out_bytes > 0) produce(static_cast<std::byte*>(scratch));
  SEXTANT_CUDA_CHECK(cudaEventRecord(g.done[rank], stream));
  wait_all();
  for (int j = 0; j < g.size; ++j) SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream, g.done[j], 0));
  if (out_bytes > 0) {
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(recv, scratch, out_bytes, cudaMemcpyDeviceToDevice, stream));
    SEXTANT_CUDA_CHECK(cudaFreeAsync(scratch, stream));
  }
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> InProcessCommunicator::create_world(
    const std::vector<cudaStream_t>& streams, std::chrono::milliseconds timeout, std::string name) {
  const int size = static_cast<int>(streams.size());
  if (size < 1 || size > kernels::kMaxSummedBuffers)
    throw std::invalid_argument("InProcessCommunicator::create_world: " + std::to_string(size) +
                                " ranks; 1 to " + std::to_string(kernels::kMaxSummedBuffers) +
                                " are supported");
  auto group = std::make_shared<InProcessGroup>(size, std::move(name), timeout);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r)
    out.push_back(std::make_unique<InProcessCommunicator>(group, r, streams[r]));
  return out;
}

InProcessCommunicator::InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank,
                                             cudaStream_t stream)
    : group_(std::move(group)), rank_(rank), stream_(stream) {}

InProcessCommunicator::~InProcessCommunicator() = default;

int InProcessCommunicator::size() const { return group_->size; }
const std::string& InProcessCommunicator::name() const { return group_->name; }

void InProcessCommunicator::fail(const char* op, const std::string& status,
                                 const std::string& why) const {
  throw CommError(op, group_->name, rank_, group_->size, status, why);
}

void InProcessCommunicator::wait_all(const char* op) {
  if (const std::string problem = group_->rendezvous.arrive_and_wait(); !problem.empty()) {
    const auto colon = problem.find(": ");
    fail(op, problem.substr(0, colon), problem.substr(colon + 2));
  }
}

void InProcessCommunicator::meet(const char* op, const void* send, std::size_t count,
                                 DataType type, int color, int key) {
  InProcessGroup& g = *group_;
  g.slots[rank_] = CollectiveSlot{op, send, count, type, color, key};
  SEXTANT_CUDA_CHECK(cudaEventRecord(g.ready[rank_], stream_));
  wait_all(op);
  // Every rank compares every slot with rank 0's, so all of them throw the
  // same error together and none is left waiting.
  const CollectiveSlot& first = g.slots[0];
  for (int j = 1; j < g.size; ++j) {
    const CollectiveSlot& s = g.slots[j];
    if (s.op != first.op || s.count != first.count || s.type != first.type) {
      std::ostringstream why;
      why << "rank 0 called " << first.op << " with " << first.count << " "
          << to_string(first.type) << " elements, rank " << j << " called " << s.op << " with "
          << s.count << " " << to_string(s.type) << " elements";
      fail(op, "mismatch", why.str());
    }
  }
}

void InProcessCommunicator::all_reduce_sum(const void* send, void* recv, std::size_t count,
                                           DataType type) {
  meet("all_reduce", send, count, type);
  InProcessGroup& g = *group_;
  produce_and_deliver(g, rank_, stream_, recv, count * bytes_of(type), [&](std::byte* out) {
    std::vector<const std::byte*> inputs;
    for (const CollectiveSlot& s : g.slots) inputs.push_back(at(s.send, 0, type));
    sum_into(inputs, out, count, type, stream_);
  }, [&] { wait_all("all_reduce"); });
}

void InProcessCommunicator::reduce_scatter_sum(const void* send, void* recv,
                                               std::size_t recv_count, DataType type) {
  meet("reduce_scatter", send, recv_count, type);
  InProcessGroup& g = *group_;
  produce_and_deliver(g, rank_, stream_, recv, recv_count * bytes_of(type), [&](std::byte* out) {
    std::vector<const std::byte*> inputs;
    for (const CollectiveSlot& s : g.slots) inputs.push_back(at(s.send, rank_ * recv_count, type));
    sum_into(inputs, out, recv_count, type, stream_);
  }, [&] { wait_all("reduce_scatter"); });
}

void InProcessCommunicator::all_gather(const void* send, void* recv, std::size_t send_count,
                                       DataType type) {
  meet("all_gather", send, send_count, type);
  gather_blocks("all_gather", recv, send_count, 0, type);
}

void InProcessCommunicator::all_to_all(const void* send, void* recv, std::size_t count_per_rank,
                                       DataType type) {
  meet("all_to_all", send, count_per_rank, type);
  gather_blocks("all_to_all", recv, count_per_rank, rank_ * count_per_rank, type);
}

void InProcessCommunicator::gather_blocks(const char* op, void* recv, std::size_t block_count,
                                          std::size_t source_offset, DataType type) {
  InProcessGroup& g = *group_;
  const std::size_t block_bytes = block_count * bytes_of(type);
  produce_and_deliver(g, rank_, stream_, recv, g.size * block_bytes, [&](std::byte* out) {
    for (int j = 0; j < g.size; ++j)
      SEXTANT_CUDA_CHECK(cudaMemcpyAsync(out + j * block_bytes,
                                         at(g.slots[j].send, source_offset, type), block_bytes,
                                         cudaMemcpyDeviceToDevice, stream_));
  }, [&] { wait_all(op); });
}

void InProcessCommunicator::barrier() {
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  meet("barrier", nullptr, 0, DataType::kFp32);
  wait_all("barrier");  // nobody posts the next collective while another still reads the slots
}

void InProcessCommunicator::synchronize(std::chrono::milliseconds timeout) {
  if (!wait_for_stream(stream_, timeout))
    fail("synchronize", "timeout",
         "the stream's work was not done within " + seconds_text(timeout));
}

std::unique_ptr<Communicator> InProcessCommunicator::split(int color, int key, std::string name,
                                                           cudaStream_t stream) {
  meet("split", nullptr, 0, DataType::kFp32, color, key);
  InProcessGroup& g = *group_;
  if (rank_ == 0) {
    // Members of each color ordered by (key, rank); one new group per color.
    std::map<int, std::vector<std::pair<int, int>>> members;
    for (int j = 0; j < g.size; ++j)
      if (g.slots[j].color >= 0) members[g.slots[j].color].push_back({g.slots[j].key, j});
    std::fill(g.split_groups.begin(), g.split_groups.end(), nullptr);
    for (auto& [c, list] : members) {
      std::sort(list.begin(), list.end());
      auto group = std::make_shared<InProcessGroup>(static_cast<int>(list.size()), name,
                                                    g.rendezvous.timeout());
      for (std::size_t i = 0; i < list.size(); ++i) {
        g.split_groups[list[i].second] = group;
        g.split_ranks[list[i].second] = static_cast<int>(i);
      }
    }
  }
  wait_all("split");
  if (color < 0) return nullptr;
  return std::make_unique<InProcessCommunicator>(g.split_groups[rank_], g.split_ranks[rank_],
                                                 stream);
}

void InProcessCommunicator::check_peer(const char* op, int peer) const {
  if (peer < 0 || peer >= group_->size)
    fail(op, "invalid peer",
         "peer " + std::to_string(peer) + " is not a rank of this group (0 to " +
             std::to_string(group_->size - 1) + ")");
}

std::shared_ptr<InProcessMessage> InProcessCommunicator::post(const char* op,
                                                                             const void* data,
                                                                             std::size_t bytes,
                                                                             int peer) {
  check_peer(op, peer);
  auto message = std::make_shared<InProcessMessage>();
  message->data = data;
  message->bytes = bytes;
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&message->ready, cudaEventDisableTiming));
  SEXTANT_CUDA_CHECK(cudaEventRecord(message->ready, stream_));
  InProcessGroup& g = *group_;
  {
    std::lock_guard lock(g.mailbox_mutex);
    g.mailboxes[{rank_, peer}].push_back(message);
  }
  g.mailbox_changed.notify_all();
  return message;
}

void InProcessCommunicator::await_taken(const char* op, const std::shared_ptr<InProcessMessage>& message,
                                        int peer) {
  InProcessGroup& g = *group_;
  std::unique_lock lock(g.mailbox_mutex);
  const bool taken = g.mailbox_changed.wait_for(lock, g.rendezvous.timeout(),
                                                [&] { return message->taken; });
  cudaEventDestroy(message->ready);  // waits already enqueued on it still complete
  if (!taken)
    fail(op, "timeout", "rank " + std::to_string(peer) + " did not receive within " +
                            seconds_text(g.rendezvous.timeout()));
  if (!message->error.empty()) fail(op, "mismatch", message->error);
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream_, message->consumed, 0));
  cudaEventDestroy(message->consumed);
}

void InProcessCommunicator::take(const char* op, void* data, std::size_t bytes, int peer) {
  check_peer(op, peer);
  InProcessGroup& g = *group_;
  std::shared_ptr<InProcessMessage> message;
  {
    std::unique_lock lock(g.mailbox_mutex);
    auto& box = g.mailboxes[{peer, rank_}];
    if (!g.mailbox_changed.wait_for(lock, g.rendezvous.timeout(), [&] { return !box.empty(); }))
      fail(op, "timeout", "no message from rank " + std::to_string(peer) + " within " +
                              seconds_text(g.rendezvous.timeout()));
    message = box.front();
    box.pop_front();
    if (message->bytes != bytes) {
      message->error = "rank " + std::to_string(peer) + " sent " + std::to_string(message->bytes) +
                       " bytes; rank " + std::to_string(rank_) + " expected " +
                       std::to_string(bytes);
      message->taken = true;
      g.mailbox_changed.notify_all();
      fail(op, "mismatch", message->error);
    }
  }
  cudaEvent_t consumed = nullptr;
  SEXTANT_CUDA_CHECK(cudaStreamWaitEvent(stream_, message->ready, 0));
  if (bytes > 0)
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(data, message->data, bytes, cudaMemcpyDeviceToDevice, stream_));
  SEXTANT_CUDA_CHECK(cudaEventCreateWithFlags(&consumed, cudaEventDisableTiming));
  SEXTANT_CUDA_CHECK(cudaEventRecord(consumed, stream_));
  {
    std::lock_guard lock(g.mailbox_mutex);
    message->consumed = consumed;
    message->taken = true;
  }
  g.mailbox_changed.notify_all();
}

void InProcessCommunicator::send(const void* data, std::size_t count, DataType type, int peer) {
  await_taken("send", post("send", data, count * bytes_of(type), peer), peer);
}

void InProcessCommunicator::recv(void* data, std::size_t count, DataType type, int peer) {
  take("recv", data, count * bytes_of(type), peer);
}

void InProcessCommunicator::send_recv(const void* send_data, std::size_t send_count,
                                      int send_peer, void* recv_data, std::size_t recv_count,
                                      int recv_peer, DataType type) {
  auto message = post("send_recv", send_data, send_count * bytes_of(type), send_peer);
  take("send_recv", recv_data, recv_count * bytes_of(type), recv_peer);
  await_taken("send_recv", message, send_peer);
}

void InProcessCommunicator::exchange(std::span<const PeerTransfer> sends,
                                     std::span<const PeerTransfer> receives, DataType type) {
  std::vector<std::shared_ptr<InProcessMessage>> posted;
  for (const PeerTransfer& t : sends) posted.push_back(post("exchange", t.data, t.count * bytes_of(type), t.peer));
  // Each receive as soon as its message is there: only this rank takes from
  // its own mailboxes, so one found non-empty stays so until take().
  for (const PeerTransfer& t : receives) check_peer("exchange", t.peer);
  InProcessGroup& g = *group_;
  std::vector<bool> done(receives.size(), false);
  for (std::size_t left = receives.size(); left > 0; --left) {
    std::size_t next = receives.size();
    {
      std::unique_lock lock(g.mailbox_mutex);
      auto ready = [&] {
        for (std::size_t i = 0; i < receives.size(); ++i) {
          if (done[i]) continue;
          if (!g.mailboxes[{receives[i].peer, rank_}].empty()) {
            next = i;
            return true;
          }
        }
        return false;
      };
      if (!g.mailbox_changed.wait_for(lock, g.rendezvous.timeout(), ready))
        fail("exchange", "timeout", "no message for " + std::to_string(left) + " receive(s) within " +
                                        seconds_text(g.rendezvous.timeout()));
    }
    take("exchange", receives[next].data, receives[next].count * bytes_of(type), receives[next].peer);
    done[next] = true;
  }
  for (std::size_t i = 0; i < posted.size(); ++i) await_taken("exchange", posted[i], sends[i].peer);
}

}  // namespace sextant::engine::comm
