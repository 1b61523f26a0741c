#include "engine/calibration/profile_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace sextant::engine::calibration {

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// Seconds and derived values: 4 significant digits, always in exponent form so
// every time reads alike ("1.234e-04").
std::string seconds(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3e", s);
  return buffer;
}

// A derived scalar: integers as integers, fractions with 4 significant digits.
std::string scalar(double v) {
  char buffer[32];
  if (v == static_cast<double>(static_cast<long long>(v)) && v < 1e15 && v > -1e15)
    std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(v));
  else
    std::snprintf(buffer, sizeof buffer, "%.4g", v);
  return buffer;
}

void scalar_line(std::ostringstream& out, const char* key, const DerivedScalar& d) {
  out << key << ": " << scalar(d.value);
  if (!d.how.empty()) out << "  # " << d.how;
  out << "\n";
}

template <typename Row, typename Format>
void rows(std::ostringstream& out, const std::string& indent, const std::string& key,
          const std::string& columns, const std::vector<Row>& points, Format format) {
  out << indent << key << ":";
  if (points.empty()) {
    out << " []  # " << columns << "\n";
    return;
  }
  out << "  # " << columns << "\n";
  for (const Row& p : points) out << indent << "  - [" << format(p) << "]\n";
}

std::string linear_row(const LinearPoint& p) {
  return std::to_string(p.tokens) + ", " + std::to_string(p.in_width) + ", " +
         std::to_string(p.out_width) + ", " + seconds(p.forward_s) + ", " +
         seconds(p.input_gradient_s) + ", " + seconds(p.weight_gradient_s);
}

std::string linear_epilogue_row(const LinearPoint& p) {
  return std::to_string(p.tokens) + ", " + std::to_string(p.in_width) + ", " + std::to_string(p.out_width) +
         ", " + seconds(p.forward_bias_s) + ", " + seconds(p.forward_residual_s) + ", " +
         seconds(p.forward_bias_residual_s) + ", " + seconds(p.forward_bias_gelu_s) + ", " +
         seconds(p.input_gradient_dgelu_s);
}

std::string collective_row(const CollectivePoint& p) {
  return std::to_string(p.ranks) + ", " + std::to_string(p.bytes) + ", " + seconds(p.seconds);
}

}  // namespace

std::string profile_yaml(const MeasuredProfile& p) {
  std::ostringstream out;
  out << "# Measured cost profile (PROFILE_SCHEMA): the engine's own kernels on one GPU model.\n"
         "# All times in seconds (median of repeated CUDA-event timings), sizes in elements\n"
         "# unless a key says _bytes. Written by `sextant calibrate`; the method is under\n"
         "# measurement:.\n";
  out << "name: " << p.name << "\n";
  out << "gpu: " << p.gpu << "\n";
  out << "software: " << p.software << "\n";
  out << "source: " << quoted(p.source) << "\n";
  const ProfileScalars& s = p.scalars;
  scalar_line(out, "gemm_efficiency", s.gemm_efficiency);
  scalar_line(out, "fp8_gemm_efficiency", s.fp8_gemm_efficiency);
  scalar_line(out, "gemm_tile_m", s.gemm_tile_m);
  scalar_line(out, "gemm_tile_n", s.gemm_tile_n);
  scalar_line(out, "gemm_k_half", s.gemm_k_half);
  scalar_line(out, "flash_attention_forward_efficiency", s.flash_attention_forward_efficiency);
  scalar_line(out, "flash_attention_backward_efficiency", s.flash_attention_backward_efficiency);
  scalar_line(out, "flash_attention_half_efficiency_tiles", s.flash_attention_half_efficiency_tiles);
  scalar_line(out, "sustained_compute_fraction", s.sustained_compute_fraction);
  scalar_line(out, "memory_efficiency", s.memory_efficiency);
  scalar_line(out, "kernel_overhead_s", s.kernel_overhead_s);
  scalar_line(out, "nvlink_efficiency", s.nvlink_efficiency);
  scalar_line(out, "collective_launch_s", s.collective_launch_s);
  scalar_line(out, "network_efficiency", s.network_efficiency);

  const Provenance& m = p.measurement;
  out << "measurement:\n";
  const std::pair<const char*, const std::string*> provenance[] = {
      {"gpu_name", &m.gpu_name},         {"driver_version", &m.driver_version},
      {"cuda_runtime_version", &m.cuda_runtime_version}, {"cublas_version", &m.cublas_version},
      {"nccl_version", &m.nccl_version}, {"gpu_count", &m.gpu_count},
      {"commit", &m.commit},             {"date", &m.date},
      {"command", &m.command},           {"method", &m.method},
      {"duration_s", &m.duration_s}};
  for (const auto& [key, value] : provenance) out << "  " << key << ": " << quoted(*value) << "\n";

  const std::string linear_columns =
      "[tokens, in_width, out_width, forward_s, input_gradient_s, weight_gradient_s]";
  rows(out, "", "linear_bf16", linear_columns, p.linear_bf16, linear_row);
  rows(out, "", "linear_fp8", linear_columns, p.linear_fp8, linear_row);
  rows(out, "", "linear_bf16_epilogues",
       "[tokens, in_width, out_width, forward_bias_s, forward_residual_s, forward_bias_residual_s, "
       "forward_bias_gelu_s, input_gradient_dgelu_s]: the bf16 products with the engine's fused epilogues",
       p.linear_bf16, linear_epilogue_row);
  // Multi-head rows keep the table every profile has; grouped-query rows, with
  // their kv_heads, follow in their own (written only when there are some, so a
  // profile without them reads as before).
  std::vector<AttentionPoint> multi_head, grouped;
  for (const AttentionPoint& a : p.attention) (a.kv_heads == a.heads ? multi_head : grouped).push_back(a);
  rows(out, "", "attention", "[batch, heads, seq, head_dim, forward_s, backward_s]", multi_head,
       [](const AttentionPoint& a) {
         return std::to_string(a.batch) + ", " + std::to_string(a.heads) + ", " +
                std::to_string(a.seq) + ", " + std::to_string(a.head_dim) + ", " +
                seconds(a.forward_s) + ", " + seconds(a.backward_s);
       });
  if (!grouped.empty())
    rows(out, "", "attention_gqa", "[batch, heads, kv_heads, seq, head_dim, forward_s, backward_s]", grouped,
         [](const AttentionPoint& a) {
           return std::to_string(a.batch) + ", " + std::to_string(a.heads) + ", " + std::to_string(a.kv_heads) +
                  ", " + std::to_string(a.seq) + ", " + std::to_string(a.head_dim) + ", " +
                  seconds(a.forward_s) + ", " + seconds(a.backward_s);
         });
  out << "elementwise:";
  if (p.elementwise.empty()) out << " {}";
  out << "\n";
  for (const ElementwiseTable& t : p.elementwise) {
    rows(out, "  ", t.kernel, "[rows, width, seconds]", t.points, [](const ElementwisePoint& e) {
      return std::to_string(e.rows) + ", " + std::to_string(e.width) + ", " + seconds(e.seconds);
    });
  }
  const Overheads& o = p.overheads;
  out << "overheads:\n";
  out << "  kernel_launch_s: " << seconds(o.kernel_launch_s) << "\n";
  out << "  graph_kernel_s: " << seconds(o.graph_kernel_s) << "\n";
  out << "  graph_launch_s: " << seconds(o.graph_launch_s) << "\n";
  out << "  host_step_s: " << seconds(o.host_step_s) << "\n";
  out << "nccl:\n";
  const std::string nccl_columns = "[ranks, bytes, seconds]";
  rows(out, "  ", "all_reduce", nccl_columns, p.nccl.all_reduce, collective_row);
  rows(out, "  ", "reduce_scatter", nccl_columns, p.nccl.reduce_scatter, collective_row);
  rows(out, "  ", "all_gather", nccl_columns, p.nccl.all_gather, collective_row);
  rows(out, "  ", "all_to_all", nccl_columns, p.nccl.all_to_all, collective_row);
  rows(out, "  ", "send_recv", nccl_columns, p.nccl.send_recv, collective_row);
  return out.str();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file)
      throw std::runtime_error(path + ": cannot create " + temporary + ": " + std::strerror(errno));
    file << text;
    file.flush();
    if (!file) {
      const std::string reason = std::strerror(errno);
      std::remove(temporary.c_str());
      throw std::runtime_error(path + ": writing " + temporary + " failed: " + reason);
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw std::runtime_error(path + ": cannot rename " + temporary + " over it: " + reason);
  }
}

}  // namespace sextant::engine::calibration
