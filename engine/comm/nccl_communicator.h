// The communicator of one process per GPU, through NCCL.
//
// A world is made once (rank 0 calls nccl_unique_id(), the launch rendezvous
// carries the bytes to every rank, each calls NcclCommunicator::join), and the
// parallel groups are split from it (parallel_groups.h). Every NCCL call is
// checked: a failure throws CommError naming the collective, the group and
// NCCL's words, including ncclGetLastError's detail.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"

struct ncclComm;

namespace sextant::engine::comm {

/// A new world's id (NCCL's ncclUniqueId, 128 opaque bytes) for rank 0 to hand out.
std::vector<std::byte> nccl_unique_id();

/// "2.28.3": the NCCL library loaded at run time.
std::string nccl_version();

class NcclCommunicator final : public Communicator {
 public:
  /// Joins the world `unique_id` names as `rank` of `size`, on the current CUDA
  /// device, bound to `stream`; returns once every rank has joined.
  static std::unique_ptr<NcclCommunicator> join(const std::vector<std::byte>& unique_id, int size,
                                                int rank, cudaStream_t stream,
                                                std::string name = "world");
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
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
  /// Throws CommError naming the collective that was not done (the last one
  /// queued: the stream runs them in order, so it is the one still waiting or
  /// behind the one waiting) and its number on this group.
  void synchronize(std::chrono::milliseconds timeout) override;
  void abort() override;
  std::unique_ptr<Communicator> split(int color, int key, std::string name,
                                      cudaStream_t stream) override;

 private:
  NcclCommunicator(ncclComm* comm, std::string name, cudaStream_t stream);
  void check(int result, const char* collective) const;
  // Notes a collective queued on the stream, for synchronize's message.
  void queued(const char* collective);
  [[noreturn]] void abort_and_throw(const std::string& status, const std::string& why);

  ncclComm* comm_;
  std::string name_;
  cudaStream_t stream_;
  int rank_ = 0;
  int size_ = 1;
  float* barrier_word_ = nullptr;  // device: what barrier() all-reduces
  const char* last_collective_ = "synchronize";  // none queued yet
  long long collectives_ = 0;                    // queued on this group so far
};

}  // namespace sextant::engine::comm
