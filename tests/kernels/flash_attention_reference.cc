#include "tests/kernels/flash_attention_reference.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace sextant::kernels::testing {

std::string flash_attention_shape_name(const ::testing::TestParamInfo<FlashAttentionShape>& info) {
  const auto& s = info.param;
  std::string name = "b";  // appended piecewise: "b" + to_string trips GCC 12's -Wrestrict
  name += std::to_string(s.batch);
  name += "_s" + std::to_string(s.seq);
  if (s.kv_seq != 0) name += "_kvs" + std::to_string(s.kv_seq);
  name += "_h" + std::to_string(s.heads);
  name += "_kv" + std::to_string(s.kv_heads);
  name += "_d" + std::to_string(s.head_dim);
  if (s.q_row_stride != 0) name += "_qstride" + std::to_string(s.q_row_stride);
  if (s.kv_row_stride != 0) name += "_kvstride" + std::to_string(s.kv_row_stride);
  if (!s.causal) name += "_noncausal";
  return name;
}

int reference_kv_seq(const FlashAttentionShape& s) { return s.kv_seq != 0 ? s.kv_seq : s.seq; }

int reference_last_key(const FlashAttentionShape& s, int i) {
  return s.causal ? i + reference_kv_seq(s) - s.seq : reference_kv_seq(s) - 1;
}

AttentionReference reference_forward(const std::vector<double>& q, const std::vector<double>& k,
                                     const std::vector<double>& v, const FlashAttentionShape& s) {
  const int d = s.head_dim;
  const int group = s.heads / s.kv_heads;
  const int kv_seq = reference_kv_seq(s);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  AttentionReference ref;
  ref.out.assign(static_cast<std::size_t>(s.batch) * s.seq * s.heads * d, 0.0);
  ref.lse.assign(static_cast<std::size_t>(s.batch) * s.heads * s.seq, 0.0);
  std::vector<double> scores(kv_seq);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const int hk = h / group;
      for (int i = 0; i < s.seq; ++i) {
        const double* qi = &q[((static_cast<std::size_t>(b) * s.seq + i) * s.heads + h) * d];
        double max_score = -INFINITY;
        const int last = reference_last_key(s, i);
        for (int j = 0; j <= last; ++j) {
          const double* kj = &k[((static_cast<std::size_t>(b) * kv_seq + j) * s.kv_heads + hk) * d];
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += qi[c] * kj[c];
          scores[j] = dot * scale;
          max_score = std::max(max_score, scores[j]);
        }
        double sum = 0;
        for (int j = 0; j <= last; ++j) sum += std::exp(scores[j] - max_score);
        const double lse = max_score + std::log(sum);
        ref.lse[(static_cast<std::size_t>(b) * s.heads + h) * s.seq + i] = lse;
        double* oi = &ref.out[((static_cast<std::size_t>(b) * s.seq + i) * s.heads + h) * d];
        for (int j = 0; j <= last; ++j) {
          const double p = std::exp(scores[j] - lse);
          const double* vj = &v[((static_cast<std::size_t>(b) * kv_seq + j) * s.kv_heads + hk) * d];
          for (int c = 0; c < d; ++c) oi[c] += p * vj[c];
        }
      }
    }
  return ref;
}

AttentionGradients reference_backward(const std::vector<double>& q, const std::vector<double>& k,
                                      const std::vector<double>& v, const std::vector<double>& out,
                                      const std::vector<double>& lse,
                                      const std::vector<double>& dout,
                                      const FlashAttentionShape& s, bool heads_rounded) {
  const int d = s.head_dim;
  const int group = s.heads / s.kv_heads;
  const int kv_seq = reference_kv_seq(s);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const double unit = std::ldexp(1.0, -9);        // bf16 rounding, relative
  const double fp32_unit = std::ldexp(1.0, -24);  // fp32 rounding, relative
  AttentionGradients g;
  g.dq.assign(q.size(), 0.0);
  g.dq_atol.assign(q.size(), 0.0);
  g.dk.assign(k.size(), 0.0);
  g.dk_atol.assign(k.size(), 0.0);
  g.dv.assign(v.size(), 0.0);
  g.dv_atol.assign(v.size(), 0.0);
  auto q_at = [&](int b, int i, int h) {
    return ((static_cast<std::size_t>(b) * s.seq + i) * s.heads + h) * d;
  };
  auto kv_at = [&](int b, int j, int hk) {
    return ((static_cast<std::size_t>(b) * kv_seq + j) * s.kv_heads + hk) * d;
  };
  // One query head's shares of dK and dV, (kv_seq, d) of its kv head.
  std::vector<double> head_dk(static_cast<std::size_t>(kv_seq) * d), head_dv(head_dk.size());
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const int hk = h / group;
      std::fill(head_dk.begin(), head_dk.end(), 0.0);
      std::fill(head_dv.begin(), head_dv.end(), 0.0);
      for (int i = 0; i < s.seq; ++i) {
        const std::size_t qi = q_at(b, i, h);
        double delta = 0, delta_magnitude = 0;
        for (int c = 0; c < d; ++c) {
          delta += dout[qi + c] * out[qi + c];
          delta_magnitude += std::abs(dout[qi + c] * out[qi + c]);
        }
        const double lse_i = lse[(static_cast<std::size_t>(b) * s.heads + h) * s.seq + i];
        for (int j = 0; j <= reference_last_key(s, i); ++j) {
          const std::size_t kj = kv_at(b, j, hk);
          double dot = 0, dp = 0, dp_magnitude = 0;
          for (int c = 0; c < d; ++c) {
            dot += q[qi + c] * k[kj + c];
            dp += dout[qi + c] * v[kj + c];
            dp_magnitude += std::abs(dout[qi + c] * v[kj + c]);
          }
          const double p = std::exp(dot * scale - lse_i);
          const double ds = p * (dp - delta);
          const double ds_error =
              unit * std::abs(ds) + p * d * fp32_unit * (dp_magnitude + delta_magnitude);
          for (int c = 0; c < d; ++c) {
            g.dv[kj + c] += p * dout[qi + c];
            g.dv_atol[kj + c] += unit * p * std::abs(dout[qi + c]);
            g.dk[kj + c] += scale * ds * q[qi + c];
            g.dk_atol[kj + c] += scale * ds_error * std::abs(q[qi + c]);
            g.dq[qi + c] += scale * ds * k[kj + c];
            g.dq_atol[qi + c] += scale * ds_error * std::abs(k[kj + c]);
            head_dv[static_cast<std::size_t>(j) * d + c] += p * dout[qi + c];
            head_dk[static_cast<std::size_t>(j) * d + c] += scale * ds * q[qi + c];
          }
        }
      }
      if (!heads_rounded) continue;
      for (int j = 0; j < kv_seq; ++j)
        for (int c = 0; c < d; ++c) {
          const std::size_t kj = kv_at(b, j, hk) + c, share = static_cast<std::size_t>(j) * d + c;
          g.dv_atol[kj] += unit * std::abs(head_dv[share]);
          g.dk_atol[kj] += unit * std::abs(head_dk[share]);
        }
    }
  for (auto* bounds : {&g.dq_atol, &g.dk_atol, &g.dv_atol})
    for (double& x : *bounds) x = 2 * x + 1e-6;
  return g;
}

double lse_atol(const FlashAttentionShape& s) {
  return std::max(1e-4, std::ldexp(static_cast<double>(reference_kv_seq(s)), -24));
}

std::vector<Bf16> to_bf16(const std::vector<double>& values) {
  std::vector<Bf16> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = from_float(static_cast<float>(values[i]));
  return out;
}

}  // namespace sextant::kernels::testing
