#include "engine/calibration/calibration_run.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>

#include "engine/calibration/attention.h"
#include "engine/calibration/device_info.h"
#include "engine/calibration/elementwise.h"
#include "engine/calibration/linear.h"
#include "engine/calibration/nccl.h"
#include "engine/calibration/overheads.h"
#include "engine/calibration/progress_bar.h"
#include "kernels/cuda_check.h"
#include "kernels/gemm_cublaslt.h"

namespace sextant::engine::calibration {

namespace {

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[16];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d", &utc);
  return buffer;
}

class Stream {
 public:
  Stream() { SEXTANT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Estimated cost of a point: its roofline time times the launches it will get
// (warm-up, tuning, timed batches), so the bar's estimate follows the big points.
double launches_cost(double estimate_s, int products, int tuning_launches) {
  return products * (estimate_s * (tuning_launches + 3 + 9 * std::max(1.0, 300e-6 / estimate_s)) + 9 * 40e-6) + 2e-4;
}

}  // namespace

CalibrationPlan plan_calibration(const std::vector<sim::ModelConfig>& models, const ShapeOptions& options) {
  CalibrationPlan plan;
  plan.linear = linear_shapes(models, options);
  plan.attention = attention_shapes(models, options);
  for (const std::string& kernel : elementwise_kernel_names())
    plan.elementwise.emplace_back(kernel, elementwise_shapes(kernel, models, options));
  return plan;
}

MeasuredProfile run_calibration(const CalibrationPlan& plan, const CalibrationSettings& settings,
                                std::ostream& progress_out) {
  const auto start = std::chrono::steady_clock::now();
  SEXTANT_CUDA_CHECK(cudaSetDevice(settings.device));
  const DeviceInfo info = device_info(settings.device);
  const int gpu_count = cuda_device_count();

  // One scratch allocation, sized for the largest point, before any timing loop.
  std::size_t scratch_bytes = std::size_t{1} << 20;
  double total_work = 0;
  for (const LinearShape& s : plan.linear) {
    scratch_bytes = std::max(scratch_bytes, linear_scratch_bytes(s, info.l2_bytes));
    total_work += launches_cost(linear_estimate_s(s), kLinearProducts, 32);
  }
  for (const AttentionShape& s : plan.attention) {
    scratch_bytes = std::max(scratch_bytes, attention_scratch_bytes(s, info.l2_bytes));
    total_work += launches_cost(attention_estimate_s(s), 1, 0);
  }
  int elementwise_points = 0;
  for (const auto& [kernel, shapes] : plan.elementwise) {
    for (const ElementwiseShape& s : shapes) {
      scratch_bytes = std::max(scratch_bytes, elementwise_scratch_bytes(kernel, s, info.l2_bytes));
      total_work += launches_cost(elementwise_estimate_s(kernel, s), 1, 0);
      ++elementwise_points;
    }
  }
  const int nccl_points = plan.nccl ? nccl_point_count(gpu_count, settings.quick) : 0;
  total_work += 0.05 + 0.02 * nccl_points;

  Stream stream;
  DeviceScratch scratch(scratch_bytes, stream.get());
  void* gemm_workspace = nullptr;
  SEXTANT_CUDA_CHECK(cudaMalloc(&gemm_workspace, kernels::kCublasLtWorkspaceBytes));
  std::unique_ptr<void, decltype(&cudaFree)> workspace_owner(gemm_workspace, &cudaFree);
  kernels::CublasLtGemm gemm(gemm_workspace, kernels::kCublasLtWorkspaceBytes);
  MeasurementContext ctx;
  ctx.stream = stream.get();
  ctx.l2_bytes = info.l2_bytes;
  ctx.sm_count = info.sm_count;
  ctx.scratch = &scratch;
  ctx.timing = settings.timing;
  ProgressBar bar(progress_out, total_work, settings.progress);

  // A point a launcher refuses (its argument checks run before any launch, so
  // the device is untouched) is left out and counted, not fatal to the run.
  int skipped = 0;
  std::string first_skip;
  auto guarded = [&](const std::string& what, const auto& measure) {
    try {
      measure();
    } catch (const kernels::KernelArgumentError& e) {
      if (skipped++ == 0) first_skip = what + ": " + e.what();
    }
  };
  MeasuredProfile profile;
  profile.overheads = measure_overheads(ctx);
  ctx.graph_kernel_s = profile.overheads.graph_kernel_s;
  bar.advance(0.05, "overheads", 1, 1);

  const int linear_points = static_cast<int>(plan.linear.size());
  for (int i = 0; i < linear_points; ++i) {
    const LinearShape& s = plan.linear[static_cast<std::size_t>(i)];
    guarded("linear", [&] { profile.linear_bf16.push_back(measure_linear(s, gemm, ctx)); });
    bar.advance(launches_cost(linear_estimate_s(s), kLinearProducts, 32), "linear", i + 1,
                linear_points);
  }
  const int attention_points = static_cast<int>(plan.attention.size());
  for (int i = 0; i < attention_points; ++i) {
    const AttentionShape& s = plan.attention[static_cast<std::size_t>(i)];
    guarded("attention", [&] { profile.attention.push_back(measure_attention(s, ctx)); });
    bar.advance(launches_cost(attention_estimate_s(s), 1, 0), "attention", i + 1, attention_points);
  }
  int done = 0;
  for (const auto& [kernel, shapes] : plan.elementwise) {
    ElementwiseTable table{kernel, {}};
    for (const ElementwiseShape& s : shapes) {
      guarded(kernel, [&] { table.points.push_back(measure_elementwise(kernel, s, ctx)); });
      bar.advance(launches_cost(elementwise_estimate_s(kernel, s), 1, 0), "elementwise", ++done, elementwise_points);
    }
    profile.elementwise.push_back(std::move(table));
  }
  SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream.get()));

  std::string nccl_note;
  if (plan.nccl && gpu_count > 1) {
    int nccl_done = 0;
    NcclResult nccl = measure_nccl(gpu_count, settings.quick,
                                   [&] { bar.advance(0.02, "nccl", ++nccl_done, nccl_points); });
    SEXTANT_CUDA_CHECK(cudaSetDevice(settings.device));
    profile.nccl = std::move(nccl.tables);
    profile.measurement.nccl_version = nccl.version;
    nccl_note = nccl.note;
  }
  bar.finish();

  const double duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Provenance& m = profile.measurement;
  m.gpu_name = info.name;
  m.driver_version = info.driver_version;
  m.cuda_runtime_version = info.cuda_runtime_version;
  m.cublas_version = info.cublas_version;
  m.gpu_count = std::to_string(gpu_count);
  m.commit = build_commit();
  m.date = today_utc();
  m.command = settings.command_line;
  m.method = settings.timing.description() + "; L2 " + std::to_string(info.l2_bytes) + " bytes, " +
             std::to_string(info.sm_count) +
             " SMs (read from the device); GEMMs through the engine's CublasLtGemm, each problem tuned first "
             "(its first 16 heuristic candidates, each timed once after a warm-up launch, the fastest kept) as the engine tunes before its first step; "
             "attention at each row's kv_heads (attention: kv_heads = heads; attention_gqa: fewer, the engine's GQA kernels); overheads on an 8-element residual_add";
  if (!nccl_note.empty()) m.method += "; NCCL: " + nccl_note;
  if (skipped > 0) m.method += "; " + std::to_string(skipped) + " point(s) refused by a launcher and left out, first: " + first_skip;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.0f", duration_s);
  m.duration_s = seconds;
  return profile;
}

}  // namespace sextant::engine::calibration
