#include "sim/core/framework_behaviour.h"

namespace sextant::sim {

std::string_view to_string(PipelineExchange value) {
  return value == PipelineExchange::kSequential ? "sequential" : "batched";
}

std::string_view to_string(CrossEntropyKernel value) {
  return value == CrossEntropyKernel::kFused ? "fused" : "unfused";
}

std::string_view to_string(GradientAccumulation value) {
  return value == GradientAccumulation::kSeparatePass ? "separate-pass"
                                                          : "in-weight-gradient-gemm";
}

std::optional<PipelineExchange> parse_pipeline_exchange(std::string_view text) {
  if (text == "batched") return PipelineExchange::kBatched;
  if (text == "sequential") return PipelineExchange::kSequential;
  return std::nullopt;
}

std::optional<CrossEntropyKernel> parse_cross_entropy_kernel(std::string_view text) {
  if (text == "unfused") return CrossEntropyKernel::kUnfused;
  if (text == "fused") return CrossEntropyKernel::kFused;
  return std::nullopt;
}

std::optional<GradientAccumulation> parse_gradient_accumulation(std::string_view text) {
  if (text == "in-weight-gradient-gemm") return GradientAccumulation::kInWeightGradientGemm;
  if (text == "separate-pass") return GradientAccumulation::kSeparatePass;
  return std::nullopt;
}

}  // namespace sextant::sim
