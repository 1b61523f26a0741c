#include "kernels/attention_tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "kernels/cuda_check.h"

namespace sextant::kernels::detail {
namespace {

using TensorMapEncoder = PFN_cuTensorMapEncodeTiled_v12000;

TensorMapEncoder tensor_map_encoder() {
  static const TensorMapEncoder encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    SEXTANT_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000,
                                                        cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || function == nullptr)
      throw CudaError("cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)", __FILE__,
                      __LINE__, "cudaDriverEntryPointSymbolNotFound",
                      "the driver has no cuTensorMapEncodeTiled (CUDA 12.0 or newer needed)");
    return reinterpret_cast<TensorMapEncoder>(function);
  }();
  return encoder;
}

}  // namespace

CUtensorMap make_attention_tensor_map(const Bf16* base, int head_dim, int heads, int seq, int batch,
                                      long long row_stride, int box_rows) {
  constexpr std::size_t kElemBytes = sizeof(Bf16);
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(seq), static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides_bytes[3] = {
      static_cast<cuuint64_t>(head_dim) * kElemBytes,
      static_cast<cuuint64_t>(row_stride) * kElemBytes,
      static_cast<cuuint64_t>(row_stride) * kElemBytes * static_cast<cuuint64_t>(seq)};
  const cuuint32_t box[4] = {kTensorMapBoxCols, 1, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult result = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<Bf16*>(base), dims, strides_bytes, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    throw CudaError("cuTensorMapEncodeTiled", __FILE__, __LINE__,
                    "CUresult " + std::to_string(static_cast<int>(result)),
                    "cannot describe the attention operand to TMA");
  return map;
}

}  // namespace sextant::kernels::detail
