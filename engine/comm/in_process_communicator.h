// N ranks as N threads on one GPU: the communicator tests use, the way
// PyTorch tests its distributed code with a threaded process group.
//
// Each collective meets at a shared rendezvous (host threads), then every rank
// enqueues on its own stream: wait for all ranks' inputs (CUDA events), compute
// its own result into scratch with device copies or the sum_buffers kernel,
// wait until every rank has read its inputs, copy the result out. So in-place
// calls work, the host never waits for the GPU, and a reduction adds the ranks
// in rank order with fp32 accumulation: the result depends only on the inputs
// and a CPU loop reproduces it bit for bit. (NCCL's rings add in another
// order and round bf16 at each step; parity tests allow for that.)
//
// A rank that does not arrive within the timeout fails the collective with a
// CommError on every rank that did, and breaks the group.
//
// Thread safety: each communicator belongs to one thread; the ranks share the
// group's state, which is safe for that.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"

namespace sextant::engine::comm {

struct InProcessGroup;
struct InProcessMessage;

class InProcessCommunicator final : public Communicator {
 public:
  /// The ranks of one world, rank r bound to streams[r] (1 to 64 ranks, one
  /// stream each, all on the current device). Hand communicator r to thread r.
  static std::vector<std::unique_ptr<Communicator>> create_world(
      const std::vector<cudaStream_t>& streams,
      std::chrono::milliseconds timeout = std::chrono::seconds(60), std::string name = "world");

  InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank, cudaStream_t stream);
  ~InProcessCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override;
  const std::string& name() const override;
  cudaStream_t stream() const override { return stream_; }

  void all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type) override;
  void reduce_scatter_sum(const void* send, void* recv, std::size_t recv_count,
                          DataType type) override;
  void all_gather(const void* send, void* recv, std::size_t send_count, DataType type) override;
  void all_to_all(const void* send, void* recv, std::size_t count_per_rank,
                  DataType type) override;
  void send(const void* data, std::size_t count, DataType type, int peer) override;
  void recv(void* data, std::size_t count, DataType type, int peer) override;
  void send_recv(const void* send_data, std::size_t send_count, int send_peer, void* recv_data,
                 std::size_t recv_count, int recv_peer, DataType type) override;
  void exchange(std::span<const PeerTransfer> sends, std::span<const PeerTransfer> receives,
                DataType type) override;
  void barrier() override;
  void synchronize(std::chrono::milliseconds timeout) override;
  std::unique_ptr<Communicator> split(int color, int key, std::string name,
                                      cudaStream_t stream) override;

 private:
  // Posts this rank's arguments and waits for every rank's; throws CommError
  // on a timeout or when the ranks disagree about `op`, `count` or `type`.
  void meet(const char* op, const void* send, std::size_t count, DataType type, int color = 0,
            int key = 0);
  void wait_all(const char* op);
  // recv block j (block_count) = rank j's send from element source_offset on.
  void gather_blocks(const char* op, void* recv, std::size_t block_count,
                     std::size_t source_offset, DataType type);
  std::shared_ptr<InProcessMessage> post(const char* op, const void* data, std::size_t bytes, int peer);
  void take(const char* op, void* data, std::size_t bytes, int peer);
  void await_taken(const char* op, const std::shared_ptr<InProcessMessage>& message, int peer);
  void check_peer(const char* op, int peer) const;
  [[noreturn]] void fail(const char* op, const std::string& status, const std::string& why) const;

  std::shared_ptr<InProcessGroup> group_;
  int rank_;
  cudaStream_t stream_;
};

}  // namespace sextant::engine::comm
