#include "engine/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>
#include <stdexcept>
#include <utility>

#include "engine/comm/comm_error.h"
#include "kernels/cuda_check.h"

namespace sextant::engine::comm {
namespace {

ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::kBf16: return ncclBfloat16;
    case DataType::kFp32: return ncclFloat32;
    case DataType::kInt32: return ncclInt32;
  }
  return ncclFloat32;
}

const char* result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult";
  }
}

const std::byte* at(const void* base, std::size_t offset, DataType type) {
  return static_cast<const std::byte*>(base) + offset * bytes_of(type);
}
std::byte* at(void* base, std::size_t offset, DataType type) {
  return static_cast<std::byte*>(base) + offset * bytes_of(type);
}

}  // namespace

std::vector<std::byte> nccl_unique_id() {
  ncclUniqueId id;
  const ncclResult_t result = ncclGetUniqueId(&id);
  if (result != ncclSuccess)
    throw CommError("ncclGetUniqueId", "world", 0, 1, result_name(result),
                    std::string(ncclGetErrorString(result)) + " (" + ncclGetLastError(nullptr) + ")");
  std::vector<std::byte> bytes(sizeof(id.internal));
  std::memcpy(bytes.data(), id.internal, bytes.size());
  return bytes;
}

std::string nccl_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
  // NCCL_VERSION(X,Y,Z) is X*10000 + Y*100 + Z since 2.9.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::join(const std::vector<std::byte>& unique_id,
                                                         int size, int rank, cudaStream_t stream,
                                                         std::string name) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal))
    throw CommError("ncclCommInitRank", name, rank, size, "invalid id",
                    "the unique id has " + std::to_string(unique_id.size()) + " bytes; NCCL's has " +
                        std::to_string(sizeof(id.internal)));
  std::memcpy(id.internal, unique_id.data(), unique_id.size());
  ncclComm_t comm = nullptr;
  const ncclResult_t result = ncclCommInitRank(&comm, size, id, rank);
  if (result != ncclSuccess)
    throw CommError("ncclCommInitRank", name, rank, size, result_name(result),
                    std::string(ncclGetErrorString(result)) + " (" + ncclGetLastError(nullptr) + ")");
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(comm, std::move(name), stream));
}

NcclCommunicator::NcclCommunicator(ncclComm* comm, std::string name, cudaStream_t stream)
    : comm_(comm), name_(std::move(name)), stream_(stream) {
  check(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
  check(ncclCommCount(comm_, &size_), "ncclCommCount");
  SEXTANT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&barrier_word_), sizeof(float)));
}

NcclCommunicator::~NcclCommunicator() {
  // A destructor cannot report; a failed finalize still frees the communicator.
  if (barrier_word_ != nullptr) cudaFree(barrier_word_);
  if (comm_ == nullptr) return;  // aborted by synchronize()
  ncclCommFinalize(comm_);
  ncclCommDestroy(comm_);
}

void NcclCommunicator::check(int status, const char* collective) const {
  if (comm_ == nullptr)
    throw CommError(collective, name_, rank_, size_, "aborted",
                    "the communicator was aborted by an earlier failure");
  const auto result = static_cast<ncclResult_t>(status);
  if (result == ncclSuccess) return;
  throw CommError(collective, name_, rank_, size_, result_name(result),
                  std::string(ncclGetErrorString(result)) + " (" + ncclGetLastError(comm_) + ")");
}

void NcclCommunicator::all_reduce_sum(const void* send, void* recv, std::size_t count,
                                      DataType type) {
  queued("all_reduce");
  check(ncclAllReduce(send, recv, count, nccl_type(type), ncclSum, comm_, stream_), "all_reduce");
}

void NcclCommunicator::reduce_scatter_sum(const void* send, void* recv, std::size_t recv_count,
                                          DataType type) {
  queued("reduce_scatter");
  check(ncclReduceScatter(send, recv, recv_count, nccl_type(type), ncclSum, comm_, stream_),
        "reduce_scatter");
}

void NcclCommunicator::all_gather(const void* send, void* recv, std::size_t send_count,
                                  DataType type) {
  queued("all_gather");
  check(ncclAllGather(send, recv, send_count, nccl_type(type), comm_, stream_), "all_gather");
}

void NcclCommunicator::all_to_all(const void* send, void* recv, std::size_t count_per_rank,
                                  DataType type) {
  // One grouped launch of size() sends and receives (NCCL's documented all-to-all).
  queued("all_to_all");
  check(ncclGroupStart(), "all_to_all");
  for (int peer = 0; peer < size_; ++peer) {
    check(ncclSend(at(send, peer * count_per_rank, type), count_per_rank, nccl_type(type), peer,
                   comm_, stream_),
          "all_to_all");
    check(ncclRecv(at(recv, peer * count_per_rank, type), count_per_rank,
                   nccl_type(type), peer, comm_, stream_),
          "all_to_all");
  }
  check(ncclGroupEnd(), "all_to_all");
}

void NcclCommunicator::send(const void* data, std::size_t count, DataType type, int peer) {
  queued("send");
  check(ncclSend(data, count, nccl_type(type), peer, comm_, stream_), "send");
}

void NcclCommunicator::recv(void* data, std::size_t count, DataType type, int peer) {
  queued("recv");
  check(ncclRecv(data, count, nccl_type(type), peer, comm_, stream_), "recv");
}

void NcclCommunicator::send_recv(const void* send_data, std::size_t send_count, int send_peer,
                                 void* recv_data, std::size_t recv_count, int recv_peer,
                                 DataType type) {
  queued("send_recv");
  check(ncclGroupStart(), "send_recv");
  check(ncclSend(send_data, send_count, nccl_type(type), send_peer, comm_, stream_), "send_recv");
  check(ncclRecv(recv_data, recv_count, nccl_type(type), recv_peer, comm_, stream_), "send_recv");
  check(ncclGroupEnd(), "send_recv");
}

void NcclCommunicator::exchange(std::span<const PeerTransfer> sends, std::span<const PeerTransfer> receives,
                                DataType type) {
  check(ncclGroupStart(), "exchange");
  for (const PeerTransfer& t : sends) check(ncclSend(t.data, t.count, nccl_type(type), t.peer, comm_, stream_), "exchange");
  for (const PeerTransfer& t : receives) check(ncclRecv(t.data, t.count, nccl_type(type), t.peer, comm_, stream_), "exchange");
  check(ncclGroupEnd(), "exchange");
}

void NcclCommunicator::barrier() {
  queued("barrier");
  check(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, stream_),
        "barrier");
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void NcclCommunicator::queued(const char* collective) {
  last_collective_ = collective;
  ++collectives_;
}

void NcclCommunicator::abort() {
  if (comm_ == nullptr) return;
  ncclCommAbort(comm_);  // unblocks the stream's kernels
  comm_ = nullptr;
}

void NcclCommunicator::abort_and_throw(const std::string& status, const std::string& why) {
  abort();
  throw CommError(last_collective_, name_, rank_, size_, status,
                  why + " (collective #" + std::to_string(collectives_) +
                      " queued on this group, the last one); the communicator was aborted");
}

void NcclCommunicator::synchronize(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream_);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) SEXTANT_CUDA_CHECK(state);
    ncclResult_t async_error = ncclSuccess;
    check(ncclCommGetAsyncError(comm_, &async_error), "synchronize");
    if (async_error != ncclSuccess && async_error != ncclInProgress)
      abort_and_throw(result_name(async_error),
                      std::string(ncclGetErrorString(async_error)) + ": " + ncclGetLastError(comm_));
    if (std::chrono::steady_clock::now() >= deadline) {
      std::ostringstream why;
      why << "not done within " << std::chrono::duration<double>(timeout).count()
          << " s: a rank that stopped, hangs or never called it?";
      abort_and_throw("timeout", why.str());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key, std::string name,
                                                      cudaStream_t stream) {
  ncclComm_t child = nullptr;
  check(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, nullptr),
        "split");
  if (child == nullptr) return nullptr;
  return std::unique_ptr<Communicator>(new NcclCommunicator(child, std::move(name), stream));
}

}  // namespace sextant::engine::comm
