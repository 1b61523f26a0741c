// A group of ranks that communicate, bound to one CUDA stream.
//
// Every operation is enqueued on the communicator's stream and is ordered with
// the other work on that stream, as NCCL's are: inputs are read once the work
// queued before the call is done, outputs are ready for the work queued after
// it. The host returns without waiting for the GPU, except where a method says
// otherwise. Collectives are called by every rank of the group, in the same
// order, with the same counts and type; send/recv pair up by peer.
//
// Two implementations: NcclCommunicator (one process per GPU, the real one)
// and InProcessCommunicator (N ranks as N threads on one GPU, for tests), so
// code written against this interface — tensor-parallel layers, the pipeline
// executor, the data-parallel optimizer — is tested on one GPU.
//
// Thread safety: one communicator is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kernels/stream.h"

namespace sextant::engine::comm {

/// Element types the collectives move and reduce. kInt32: counts, summed
/// exactly (e.g. the MoE experts' loads of a step, summed over the ranks).
enum class DataType { kBf16, kFp32, kInt32 };
std::size_t bytes_of(DataType type);
std::string_view to_string(DataType type);

/// One send or receive of an exchange(): `count` elements at `data` (read by
/// a send, written by a receive) to or from rank `peer` of the group.
struct PeerTransfer {
  void* data = nullptr;
  std::size_t count = 0;
  int peer = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  /// This rank's index in the group, 0 <= rank() < size().
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The group's name in messages: "world", "tp", "dp", ...
  virtual const std::string& name() const = 0;
  virtual cudaStream_t stream() const = 0;

  /// recv (count) = the sum over ranks of send (count). send == recv is allowed.
  virtual void all_reduce_sum(const void* send, void* recv, std::size_t count, DataType type) = 0;
  /// recv (recv_count) = the sum over ranks of send[rank·recv_count, (rank+1)·recv_count);
  /// send holds size()·recv_count elements.
  virtual void reduce_scatter_sum(const void* send, void* recv, std::size_t recv_count,
                                  DataType type) = 0;
  /// recv (size()·send_count): block j is rank j's send (send_count).
  virtual void all_gather(const void* send, void* recv, std::size_t send_count, DataType type) = 0;
  /// send and recv hold size()·count_per_rank elements: block j of send goes to
  /// rank j, block j of recv comes from rank j.
  virtual void all_to_all(const void* send, void* recv, std::size_t count_per_rank,
                          DataType type) = 0;
  /// Point to point. A send is matched by the peer's recv of the same count; a
  /// rank that sends and receives in one exchange (a ring, a pipeline's steady
  /// state) uses send_recv, which cannot deadlock whatever the peers' order.
  virtual void send(const void* data, std::size_t count, DataType type, int peer) = 0;
  virtual void recv(void* data, std::size_t count, DataType type, int peer) = 0;
  virtual void send_recv(const void* send_data, std::size_t send_count, int send_peer,
                         void* recv_data, std::size_t recv_count, int recv_peer,
                         DataType type) = 0;
  /// Several sends and receives as one group (NCCL's ncclGroupStart/End,
  /// PyTorch's batch_isend_irecv; a pipeline stage's exchange with both
  /// neighbours): every send is posted before any receive waits, and the
  /// receives complete in whatever order their messages come, so two ranks
  /// whose exchanges hold each other's messages meet whatever their order
  /// inside the exchange. Messages between two ranks still pair in the order
  /// they were sent.
  virtual void exchange(std::span<const PeerTransfer> sends, std::span<const PeerTransfer> receives,
                        DataType type) = 0;
  /// Returns on the host once every rank has called barrier() and the work
  /// queued on this rank's stream before it is done.
  virtual void barrier() = 0;
  /// Waits on the host until the work queued on this rank's stream is done.
  /// Throws CommError when it is not within `timeout` or the library reports
  /// an asynchronous error (a peer died, a network failure); NCCL's
  /// communicator is then aborted, so no later call hangs on it either.
  virtual void synchronize(std::chrono::milliseconds timeout) = 0;

  /// Gives up on the group after a failure elsewhere (a peer that stopped):
  /// NCCL's ncclCommAbort, which ends this rank's kernels waiting for peers,
  /// so its streams finish and no later call hangs (each throws CommError).
  /// The in-process group times out on the host and needs nothing.
  virtual void abort() {}

  /// Collective over this group: ranks giving the same color form a new group,
  /// ordered by key (ties by rank), named `name` and bound to `stream`. A
  /// negative color joins no group; that rank gets nullptr.
  virtual std::unique_ptr<Communicator> split(int color, int key, std::string name,
                                              cudaStream_t stream) = 0;
};

}  // namespace sextant::engine::comm
