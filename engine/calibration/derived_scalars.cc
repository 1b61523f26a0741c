#include "engine/calibration/derived_scalars.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "sim/compute/gemm_time.h"

namespace sextant::engine::calibration {

namespace {

std::string format(const char* pattern, double a, double b = 0, double c = 0, double d = 0) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, pattern, a, b, c, d);
  return buffer;
}

DerivedScalar copied(double value, const DerivationInputs& in, const char* why) {
  return {value, std::string("not measured: copied from ") + in.datasheet_profile_path + " (" + why + ")"};
}

struct TimedGemm {
  sim::GemmShape shape;
  double seconds = 0;
};

std::vector<TimedGemm> gemms_of(const std::vector<LinearPoint>& points) {
  // The three products as sim/compute/layer_time.cc names them: forward
  // (tokens, out) <- k = in; input gradient (tokens, in) <- k = out; weight
  // gradient (in, out) <- k = tokens, into an fp32 accumulator.
  std::vector<TimedGemm> out;
  for (const LinearPoint& p : points) {
    const double t = static_cast<double>(p.tokens), i = static_cast<double>(p.in_width),
                 o = static_cast<double>(p.out_width);
    out.push_back({{t, o, i, 1, false}, p.forward_s});
    out.push_back({{t, i, o, 1, false}, p.input_gradient_s});
    out.push_back({{i, o, t, 1, true}, p.weight_gradient_s});
  }
  return out;
}

// Least squares on ln(predicted / measured) over every GEMM, by grid search:
// tiles {64, 128, 256}^2, k_half 0..1024 by 32, efficiency 0.30..1.00 by 0.005.
// A grid rather than a solver: the wave term is a step function of the tile.
void fit_gemm(const MeasuredProfile& p, const DerivationInputs& in, ProfileScalars& s) {
  const std::vector<TimedGemm> gemms = gemms_of(p.linear_bf16);
  if (gemms.empty()) {
    s.gemm_efficiency = copied(in.datasheet_profile.gemm_efficiency, in, "no GEMM measured");
    s.gemm_tile_m = copied(in.datasheet_profile.gemm_tile_m, in, "no GEMM measured");
    s.gemm_tile_n = copied(in.datasheet_profile.gemm_tile_n, in, "no GEMM measured");
    s.gemm_k_half = copied(in.datasheet_profile.gemm_k_half, in, "no GEMM measured");
    return;
  }
  sim::DeviceRates r;
  r.sm_count = in.gpu.sm_count;
  r.memory_bytes_per_s = in.gpu.memory_bandwidth_bytes_per_s;
  r.kernel_overhead_s = p.overheads.graph_kernel_s;
  double best_loss = std::numeric_limits<double>::infinity();
  double best_e = 0, best_k = 0;
  int best_m = 0, best_n = 0;
  std::vector<double> compute_s(gemms.size()), memory_s(gemms.size());
  for (const int tile_m : {64, 128, 256}) {
    for (const int tile_n : {64, 128, 256}) {
      r.tile_m = tile_m;
      r.tile_n = tile_n;
      for (double k_half = 0; k_half <= 1024; k_half += 32) {
        r.gemm_k_half = k_half;
        // gemm_time_s at a near-infinite rate is memory + overhead; at the peak rate,
        // the compute term separates from it: compute = (t(peak) - t(inf)) where compute wins.
        for (std::size_t g = 0; g < gemms.size(); ++g) {
          const sim::GemmShape& shape = gemms[g].shape;
          const double flops = 2.0 * shape.m * shape.n * shape.k * shape.batch;
          compute_s[g] = flops / (in.gpu.peak_bf16_flops_per_s * (shape.k / (shape.k + k_half)) *
                                  sim::wave_efficiency(shape.m, shape.n, shape.batch, r));
          memory_s[g] = sim::gemm_time_s(shape, std::numeric_limits<double>::max(), r);
        }
        for (double e = 0.30; e <= 1.0 + 1e-9; e += 0.005) {
          double loss = 0;
          for (std::size_t g = 0; g < gemms.size(); ++g) {
            const double predicted = std::max(compute_s[g] / e + r.kernel_overhead_s, memory_s[g]);
            const double l = std::log(predicted / gemms[g].seconds);
            loss += l * l;
          }
          if (loss < best_loss) {
            best_loss = loss, best_e = e, best_k = k_half, best_m = tile_m, best_n = tile_n;
          }
        }
      }
    }
  }
  const double rms = std::sqrt(best_loss / static_cast<double>(gemms.size()));
  const std::string fit = format(
      "fitted (least squares on ln time, grid search) with gemm_tile_m/n, gemm_k_half and "
      "sim/compute/gemm_time.h on the %.0f GEMMs of linear_bf16 (3 per row): rms log error %.3f",
      static_cast<double>(gemms.size()), rms);
  s.gemm_efficiency = {best_e, fit};
  s.gemm_tile_m = {static_cast<double>(best_m), "same fit, tiles from {64, 128, 256}"};
  s.gemm_tile_n = {static_cast<double>(best_n), "same fit, tiles from {64, 128, 256}"};
  s.gemm_k_half = {best_k, "same fit, 0..1024 by 32"};
}

// The flash-attention term of sim/compute/layer_time.cc: forward FLOPs
// F = batch·heads·4·s²·d/2 (causal), backward 2.5·F, at peak·efficiency·u/(u + u_half),
// u = batch·heads·s/128 query tiles, plus one kernel overhead each. Fitted on
// the multi-head rows only: the term is the simulator's fallback where no table
// covers a shape and knows nothing of key/value heads, and the profiles written
// before grouped-query rows existed were fitted on multi-head rows alone.
void fit_attention(const MeasuredProfile& p, const DerivationInputs& in, ProfileScalars& s) {
  std::vector<AttentionPoint> multi_head;
  for (const AttentionPoint& a : p.attention)
    if (a.kv_heads == a.heads) multi_head.push_back(a);
  if (multi_head.empty()) {
    s.flash_attention_forward_efficiency =
        copied(in.datasheet_profile.flash_attention_forward_efficiency, in, "no multi-head attention measured");
    s.flash_attention_backward_efficiency =
        copied(in.datasheet_profile.flash_attention_backward_efficiency, in, "no multi-head attention measured");
    s.flash_attention_half_efficiency_tiles =
        copied(in.datasheet_profile.flash_attention_half_efficiency_tiles, in, "no multi-head attention measured");
    return;
  }
  const double peak = in.gpu.peak_bf16_flops_per_s;
  const double overhead = p.overheads.graph_kernel_s;
  double best_total = std::numeric_limits<double>::infinity();
  double best[3] = {0, 0, 0};  // forward e, backward e, u_half
  double best_rms[2] = {0, 0};
  for (double half = 0; half <= 1000; half += 5) {
    double e_best[2] = {0, 0}, loss_best[2] = {std::numeric_limits<double>::infinity(),
                                               std::numeric_limits<double>::infinity()};
    for (int pass = 0; pass < 2; ++pass) {
      for (double e = 0.20; e <= 1.0 + 1e-9; e += 0.005) {
        double loss = 0;
        for (const AttentionPoint& a : multi_head) {
          const double s_len = a.seq;
          const double flops = a.batch * a.heads * 4.0 * s_len * s_len * a.head_dim / 2.0 * (pass == 0 ? 1.0 : 2.5);
          const double tiles = a.batch * a.heads * s_len / 128.0;
          const double predicted = flops / (peak * e * tiles / (tiles + half)) + overhead;
          const double l = std::log(predicted / (pass == 0 ? a.forward_s : a.backward_s));
          loss += l * l;
        }
        if (loss < loss_best[pass]) loss_best[pass] = loss, e_best[pass] = e;
      }
    }
    if (loss_best[0] + loss_best[1] < best_total) {
      best_total = loss_best[0] + loss_best[1];
      best[0] = e_best[0], best[1] = e_best[1], best[2] = half;
      const double n = static_cast<double>(multi_head.size());
      best_rms[0] = std::sqrt(loss_best[0] / n), best_rms[1] = std::sqrt(loss_best[1] / n);
    }
  }
  const double n = static_cast<double>(multi_head.size());
  s.flash_attention_forward_efficiency = {
      best[0], format("fitted on the %.0f multi-head attention rows' forward_s with the flash term of "
                      "sim/compute/layer_time.cc (grid search): rms log error %.3f",
                      n, best_rms[0])};
  s.flash_attention_backward_efficiency = {
      best[1], format("same fit on backward_s (2.5x the forward FLOPs): rms log error %.3f", best_rms[1])};
  s.flash_attention_half_efficiency_tiles = {best[2], "same fit, shared by both passes, 0..1000 by 5"};
}

}  // namespace

ProfileScalars derive_scalars(const MeasuredProfile& p, const DerivationInputs& in) {
  ProfileScalars s;
  fit_gemm(p, in, s);
  s.fp8_gemm_efficiency =
      copied(in.datasheet_profile.fp8_gemm_efficiency, in, "the engine has no FP8 GEMM path; linear_fp8 is empty");
  fit_attention(p, in, s);
  s.sustained_compute_fraction = {
      1.0, "the tables are the kernels' own rates; interference in whole steps is the fit step's"};

  // memory_efficiency: the best residual_add rate (read a and b, write out: 3 x 2 bytes
  // per element) over the datasheet bandwidth.
  double best_bytes_per_s = 0;
  for (const ElementwiseTable& t : p.elementwise) {
    if (t.kernel != "residual_add") continue;
    for (const ElementwisePoint& e : t.points)
      best_bytes_per_s = std::max(best_bytes_per_s, 6.0 * e.rows * e.width / e.seconds);
  }
  if (best_bytes_per_s > 0 && in.gpu.memory_bandwidth_bytes_per_s > 0)
    s.memory_efficiency = {best_bytes_per_s / in.gpu.memory_bandwidth_bytes_per_s,
                           format("best residual_add rate (6 bytes per element) %.3g B/s over the "
                                  "datasheet's %.3g B/s",
                                  best_bytes_per_s, in.gpu.memory_bandwidth_bytes_per_s)};
  else
    s.memory_efficiency = copied(in.datasheet_profile.memory_efficiency, in, "no residual_add measured");

  if (p.overheads.graph_kernel_s > 0)
    s.kernel_overhead_s = {p.overheads.graph_kernel_s,
                           "overheads.graph_kernel_s: the engine replays its step as one CUDA graph"};
  else
    s.kernel_overhead_s = copied(in.datasheet_profile.kernel_overhead_s, in, "no overhead measured");

  // NCCL: bus bandwidth of all-reduce as nccl-tests defines it (doc/PERFORMANCE.md):
  // bytes / time · 2(n-1)/n, the best over sizes and group sizes, over the link's.
  double best_bus = 0, fastest_s = std::numeric_limits<double>::infinity();
  for (const CollectivePoint& c : p.nccl.all_reduce) {
    best_bus = std::max(best_bus, static_cast<double>(c.bytes) / c.seconds * 2.0 * (c.ranks - 1) / c.ranks);
    fastest_s = std::min(fastest_s, c.seconds);
  }
  if (best_bus > 0 && in.link_bandwidth_bytes_per_s > 0)
    s.nvlink_efficiency = {best_bus / in.link_bandwidth_bytes_per_s,
                           format("best all_reduce bus bandwidth %.3g B/s over the cluster preset's "
                                  "%.3g B/s per direction",
                                  best_bus, in.link_bandwidth_bytes_per_s)};
  else
    s.nvlink_efficiency = copied(in.datasheet_profile.nvlink_efficiency, in, "one GPU: no NCCL measured");
  if (std::isfinite(fastest_s))
    s.collective_launch_s = {fastest_s, "the fastest all_reduce measured (smallest message)"};
  else
    s.collective_launch_s = copied(in.datasheet_profile.collective_launch_s, in, "one GPU: no NCCL measured");
  s.network_efficiency =
      copied(in.datasheet_profile.network_efficiency, in, "one node: no network measured");
  return s;
}

}  // namespace sextant::engine::calibration
