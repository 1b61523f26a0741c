// The CPU reference model: a forward pass that keeps every activation the
// backward pass needs, and a hand-written backward pass over it.
//
// Conventions (as llm.c's): activations are (rows, width) row-major with
// rows = batch * seq, token (b, t) in row b * seq + t; an activation gradient
// is assigned (=) by the step that produces it, while parameter gradients are
// accumulated (+=), so that the tied embedding table collects both its uses.
#include "tests/engine/reference_model.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numbers>
#include <random>
#include <stdexcept>
#include <utility>

namespace sextant::engine::testing {
namespace {

using Vector = std::vector<double>;

std::size_t at(int row, int cols, int col) {
  return static_cast<std::size_t>(row) * cols + col;
}

// --- Parameters by name ------------------------------------------------------

// Calls visit(name, tensor, size) on every tensor `config` has, with the size
// it must have; Weights is ReferenceWeights, const or not. The names and their
// order are the engine's (engine/model/parameter_layout.cc).
template <typename Weights, typename Visit>
void visit_tensors(Weights& w, const ReferenceConfig& c, Visit visit) {
  const bool gpt = c.gpt();
  const std::size_t h = c.hidden;
  auto visit_if = [&](bool present, const std::string& name, auto& tensor, std::size_t size) {
    if (present) visit(name, tensor, size);
  };
  visit_if(true, "wte", w.wte, c.vocab * h);
  visit_if(gpt, "wpe", w.wpe, c.seq * h);
  for (int i = 0; i < c.num_layers && i < static_cast<int>(w.layers.size()); ++i) {
    auto& l = w.layers[i];
    const std::string p = "layers." + std::to_string(i) + ".";
    visit_if(true, p + "norm1_gamma", l.norm1_gamma, h);
    visit_if(gpt, p + "norm1_beta", l.norm1_beta, h);
    visit_if(true, p + "qkv_weight", l.qkv_weight, c.qkv_dim() * h);
    visit_if(gpt, p + "qkv_bias", l.qkv_bias, c.qkv_dim());
    visit_if(true, p + "proj_weight", l.proj_weight, h * c.q_dim());
    visit_if(gpt, p + "proj_bias", l.proj_bias, h);
    visit_if(true, p + "norm2_gamma", l.norm2_gamma, h);
    visit_if(gpt, p + "norm2_beta", l.norm2_beta, h);
    const bool dense = !c.moe();
    const std::size_t experts = dense ? 0 : c.experts;
    visit_if(dense, p + "fc1_weight", l.fc1_weight, c.fc1_dim() * h);
    visit_if(dense && gpt, p + "fc1_bias", l.fc1_bias, c.ffn_hidden);
    visit_if(dense, p + "fc2_weight", l.fc2_weight, h * c.ffn_hidden);
    visit_if(dense && gpt, p + "fc2_bias", l.fc2_bias, h);
    visit_if(!dense, p + "router_weight", l.router_weight, experts * h);
    visit_if(!dense, p + "expert_fc1_weight", l.expert_fc1_weight, experts * c.expert_fc1_dim() * h);
    visit_if(!dense, p + "expert_fc2_weight", l.expert_fc2_weight, experts * h * c.expert_ffn);
  }
  visit_if(true, "final_norm_gamma", w.final_norm_gamma, h);
  visit_if(gpt, "final_norm_beta", w.final_norm_beta, h);
  visit_if(!c.tie_embeddings, "lm_head", w.lm_head, c.vocab * h);
}

// Every problem with the config and, when given, the weights and the batch
// (tokens and targets come together), one per entry.
std::vector<std::string> problems_with(const ReferenceConfig& c, const ReferenceWeights* w,
                                       const std::vector<int>* tokens,
                                       const std::vector<int>* targets, int batch) {
  std::vector<std::string> problems;
  auto positive = [&](const char* name, int value) {
    if (value <= 0)
      problems.push_back(std::string(name) + " (" + std::to_string(value) + ") must be positive");
  };
  positive("num_layers", c.num_layers);
  positive("hidden", c.hidden);
  if (!c.moe()) positive("ffn_hidden", c.ffn_hidden);
  positive("heads", c.heads);
  positive("kv_heads", c.kv_heads);
  positive("head_dim", c.head_dim);
  positive("vocab", c.vocab);
  positive("seq", c.seq);
  if (c.heads > 0 && c.kv_heads > 0 && c.heads % c.kv_heads != 0)
    problems.push_back("heads (" + std::to_string(c.heads) + ") must be a multiple of kv_heads (" +
                       std::to_string(c.kv_heads) + ")");
  if (!c.gpt() && c.head_dim % 2 != 0)
    problems.push_back("head_dim (" + std::to_string(c.head_dim) + ") must be even for rotary embeddings");
  if (!(c.norm_eps > 0)) problems.push_back("norm_eps (" + std::to_string(c.norm_eps) + ") must be positive");
  if (!(c.rope_theta > 0))
    problems.push_back("rope_theta (" + std::to_string(c.rope_theta) + ") must be positive");
  if (c.experts < 0) problems.push_back("experts (" + std::to_string(c.experts) + ") must not be negative");
  if (c.moe()) {
    if (c.topk < 1 || c.topk > c.experts)
      problems.push_back("topk (" + std::to_string(c.topk) + ") must be in [1, experts " +
                         std::to_string(c.experts) + "]");
    positive("expert_ffn", c.expert_ffn);
    if (!(c.aux_loss_coeff >= 0))
      problems.push_back("aux_loss_coeff (" + std::to_string(c.aux_loss_coeff) + ") must not be negative");
  }
  if (!problems.empty() || w == nullptr) return problems;  // sizes below need a valid config

  if (static_cast<int>(w->layers.size()) != c.num_layers)
    problems.push_back("weights have " + std::to_string(w->layers.size()) + " layers, config " +
                       std::to_string(c.num_layers));
  visit_tensors(*w, c, [&](const std::string& name, const Vector& tensor, std::size_t size) {
    if (tensor.size() != size)
      problems.push_back(name + " has " + std::to_string(tensor.size()) + " values, expected " +
                         std::to_string(size));
  });
  if (tokens == nullptr) return problems;
  positive("batch", batch);
  const std::size_t count = static_cast<std::size_t>(std::max(batch, 0)) * c.seq;
  for (const auto& [name, ids] : {std::pair{"tokens", tokens}, std::pair{"targets", targets}}) {
    if (ids->size() != count) {
      problems.push_back(std::string(name) + " has " + std::to_string(ids->size()) +
                         " ids, expected batch (" + std::to_string(batch) + ") x seq (" +
                         std::to_string(c.seq) + ")");
      continue;
    }
    for (std::size_t i = 0; i < ids->size(); ++i) {
      if ((*ids)[i] < 0 || (*ids)[i] >= c.vocab) {
        problems.push_back(std::string(name) + "[" + std::to_string(i) + "] (" +
                           std::to_string((*ids)[i]) + ") is outside [0, vocab " +
                           std::to_string(c.vocab) + ")");
        break;
      }
    }
  }
  return problems;
}

void check(const ReferenceConfig& c, const ReferenceWeights* w, const std::vector<int>* tokens,
           const std::vector<int>* targets, int batch) {
  const std::vector<std::string> problems = problems_with(c, w, tokens, targets, batch);
  if (problems.empty()) return;
  std::string message = "reference model: ";
  for (std::size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
  throw std::invalid_argument(message);
}

// --- Linear layer ------------------------------------------------------------

// out (rows, out_dim) = in (rows, in_dim) W^T + b, W (out_dim, in_dim); the
// bias is optional (empty). Vaswani et al. 2017, eq. 2's xW + b, with
// PyTorch's transposed weight.
Vector linear_forward(const Vector& in, int rows, int in_dim, const Vector& weight,
                      const Vector& bias, int out_dim) {
  Vector out(static_cast<std::size_t>(rows) * out_dim);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out_dim; ++o) {
      double sum = bias.empty() ? 0.0 : bias[o];
      for (int i = 0; i < in_dim; ++i) sum += in[at(r, in_dim, i)] * weight[at(o, in_dim, i)];
      out[at(r, out_dim, o)] = sum;
    }
  }
  return out;
}

// The backward of linear_forward: returns din = dout W (rows, in_dim), adds
// dout^T in to dweight and the column sums of dout to dbias (when not null).
Vector linear_backward(const Vector& in, int rows, int in_dim, const Vector& weight, int out_dim,
                       const Vector& dout, Vector& dweight, Vector* dbias) {
  Vector din(static_cast<std::size_t>(rows) * in_dim, 0.0);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out_dim; ++o) {
      const double d = dout[at(r, out_dim, o)];
      if (dbias != nullptr) (*dbias)[o] += d;
      for (int i = 0; i < in_dim; ++i) {
        din[at(r, in_dim, i)] += d * weight[at(o, in_dim, i)];
        dweight[at(o, in_dim, i)] += d * in[at(r, in_dim, i)];
      }
    }
  }
  return din;
}

// --- LayerNorm and RMSNorm ---------------------------------------------------

// What the backward pass needs of a norm: the normalised input before gamma
// (x - mean) / sigma or x / rms (rows, width), and 1 / sigma or 1 / rms (rows).
struct NormCache {
  Vector normalized;
  Vector inv_scale;
};

// LayerNorm (Ba et al. 2016, eq. 3 for the statistics, eq. 4 for the gain and
// bias): y = (x - mean) / sqrt(var + eps) * gamma + beta, with the
// biased variance and eps inside the root, as torch.nn.LayerNorm.
// RMSNorm (Zhang & Sennrich 2019, eq. 4): y = x / sqrt(mean(x^2) + eps) * gamma,
// eps as torch.nn.RMSNorm and Megatron's. `layernorm` picks the first.
Vector norm_forward(bool layernorm, const Vector& x, int rows, int width, const Vector& gamma,
                    const Vector& beta, double eps, NormCache& cache) {
  Vector out(x.size());
  cache.normalized.assign(x.size(), 0.0);
  cache.inv_scale.assign(rows, 0.0);
  for (int r = 0; r < rows; ++r) {
    double mean = 0;
    if (layernorm) {
      for (int i = 0; i < width; ++i) mean += x[at(r, width, i)];
      mean /= width;
    }
    double second_moment = 0;  // the variance (LayerNorm) or the mean square (RMSNorm)
    for (int i = 0; i < width; ++i) {
      const double centered = x[at(r, width, i)] - mean;
      second_moment += centered * centered;
    }
    second_moment /= width;
    const double inv_scale = 1.0 / std::sqrt(second_moment + eps);
    cache.inv_scale[r] = inv_scale;
    for (int i = 0; i < width; ++i) {
      const double n = (x[at(r, width, i)] - mean) * inv_scale;
      cache.normalized[at(r, width, i)] = n;
      out[at(r, width, i)] = n * gamma[i] + (layernorm ? beta[i] : 0.0);
    }
  }
  return out;
}

// The backward of norm_forward; adds dx to `dx` (a residual stream's gradient)
// and the parameter gradients to dgamma and dbeta (LayerNorm only). With
// n = normalized, s = inv_scale and dn = dy * gamma, differentiating the
// definitions above gives
//   LayerNorm: dx = s (dn - mean(dn) - n mean(dn n))
//   RMSNorm:   dx = s (dn - n mean(dn n))
// (the mean(dn) term is the mean subtraction's, absent from RMSNorm).
void norm_backward(bool layernorm, const Vector& dy, int rows, int width, const Vector& gamma,
                   const NormCache& cache, Vector& dx, Vector& dgamma, Vector* dbeta) {
  for (int r = 0; r < rows; ++r) {
    double mean_dn = 0, mean_dn_n = 0;
    for (int i = 0; i < width; ++i) {
      const double dn = dy[at(r, width, i)] * gamma[i];
      mean_dn += dn;
      mean_dn_n += dn * cache.normalized[at(r, width, i)];
    }
    mean_dn /= width;
    mean_dn_n /= width;
    if (!layernorm) mean_dn = 0;
    for (int i = 0; i < width; ++i) {
      const double d = dy[at(r, width, i)];
      const double n = cache.normalized[at(r, width, i)];
      dgamma[i] += d * n;
      if (layernorm) (*dbeta)[i] += d;
      dx[at(r, width, i)] += cache.inv_scale[r] * (d * gamma[i] - mean_dn - n * mean_dn_n);
    }
  }
}

// --- Rotary position embedding -----------------------------------------------

// Rotates `head` by `direction` (+1 forward, -1 backward) times the angles of
// `position`. Su et al. 2021, eq. 34 (R x = x * cos + rotate(x) * sin) with
// eq. 15's frequencies theta^(-2i/d), in the rotate-half pairing of GPT-NeoX,
// HF Llama and Megatron (element i with i + d/2, not 2i with 2i + 1):
//   out[i] = x[i] cos - x[i + d/2] sin,  out[i + d/2] = x[i + d/2] cos + x[i] sin.
// The rotation is orthogonal, so its backward is the rotation by -angle.
void rotate(std::span<double> head, int position, double theta, double direction) {
  const int d = static_cast<int>(head.size());
  const int half = d / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = direction * position * std::pow(theta, -2.0 * i / d);
    const double cos = std::cos(angle), sin = std::sin(angle);
    const double x1 = head[i], x2 = head[i + half];
    head[i] = x1 * cos - x2 * sin;
    head[i + half] = x2 * cos + x1 * sin;
  }
}

// Rotates every query and key head of qkv (rows, qkv_dim) at its token's
// position in its sequence; value heads are left alone.
void rotate_queries_and_keys(const ReferenceConfig& c, Vector& qkv, int rows, double direction) {
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < c.heads + c.kv_heads; ++h) {  // Q heads, then K heads
      std::span<double> head(&qkv[at(r, c.qkv_dim(), h * c.head_dim)], c.head_dim);
      rotate(head, r % c.seq, c.rope_theta, direction);
    }
  }
}

// --- Causal multi-head attention ---------------------------------------------

// Offsets in a qkv row of query head h and of key / value head g.
int q_offset(const ReferenceConfig& c, int h) { return h * c.head_dim; }
int k_offset(const ReferenceConfig& c, int g) { return c.q_dim() + g * c.head_dim; }
int v_offset(const ReferenceConfig& c, int g) { return c.q_dim() + c.kv_dim() + g * c.head_dim; }
// Grouped-query attention (Ainslie et al. 2023, section 2.2): heads / kv_heads
// consecutive query heads share one key/value head.
int kv_head_of(const ReferenceConfig& c, int h) { return h / (c.heads / c.kv_heads); }

std::size_t prob_index(const ReferenceConfig& c, int b, int h, int i, int j) {
  return ((static_cast<std::size_t>(b) * c.heads + h) * c.seq + i) * c.seq + j;
}

// Scaled dot-product attention (Vaswani et al. 2017, eq. 1), softmax(q k^T /
// sqrt(d)) v, per head (section 3.2.2), with the decoder's causal mask
// (section 3.2.3): query i attends to keys j <= i. Fills probs (batch, heads,
// seq, seq), zero above the diagonal, and returns the heads side by side,
// (rows, q_dim).
Vector attention_forward(const ReferenceConfig& c, int batch, const Vector& qkv, Vector& probs) {
  const int d = c.head_dim, w = c.qkv_dim();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  probs.assign(static_cast<std::size_t>(batch) * c.heads * c.seq * c.seq, 0.0);
  Vector out(static_cast<std::size_t>(batch) * c.seq * c.q_dim(), 0.0);
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < c.heads; ++h) {
      const int g = kv_head_of(c, h);
      for (int i = 0; i < c.seq; ++i) {
        const double* q = &qkv[at(b * c.seq + i, w, q_offset(c, h))];
        double max_score = -std::numeric_limits<double>::infinity();
        for (int j = 0; j <= i; ++j) {
          const double* k = &qkv[at(b * c.seq + j, w, k_offset(c, g))];
          double score = 0;
          for (int e = 0; e < d; ++e) score += q[e] * k[e];
          probs[prob_index(c, b, h, i, j)] = score * scale;
          max_score = std::max(max_score, score * scale);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) {
          double& p = probs[prob_index(c, b, h, i, j)];
          p = std::exp(p - max_score);
          sum += p;
        }
        double* o = &out[at(b * c.seq + i, c.q_dim(), q_offset(c, h))];
        for (int j = 0; j <= i; ++j) {
          double& p = probs[prob_index(c, b, h, i, j)];
          p /= sum;
          const double* v = &qkv[at(b * c.seq + j, w, v_offset(c, g))];
          for (int e = 0; e < d; ++e) o[e] += p * v[e];
        }
      }
    }
  }
  return out;
}

// The backward of attention_forward: returns dqkv (rows, qkv_dim). With
// o_i = sum_j p_ij v_j and p_i = softmax_j(s_ij), s_ij = scale q_i.k_j:
//   dv_j += p_ij do_i;  dp_ij = do_i.v_j;  ds_ij = p_ij (dp_ij - sum_k p_ik dp_ik);
//   dq_i += scale ds_ij k_j;  dk_j += scale ds_ij q_i.
// Key/value heads shared by several query heads sum their gradients.
Vector attention_backward(const ReferenceConfig& c, int batch, const Vector& qkv,
                          const Vector& probs, const Vector& dout) {
  const int d = c.head_dim, w = c.qkv_dim();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  Vector dqkv(qkv.size(), 0.0);
  Vector dp(c.seq);
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < c.heads; ++h) {
      const int g = kv_head_of(c, h);
      for (int i = 0; i < c.seq; ++i) {
        const double* o_grad = &dout[at(b * c.seq + i, c.q_dim(), q_offset(c, h))];
        double p_dot_dp = 0;
        for (int j = 0; j <= i; ++j) {
          const double p = probs[prob_index(c, b, h, i, j)];
          const double* v = &qkv[at(b * c.seq + j, w, v_offset(c, g))];
          double* v_grad = &dqkv[at(b * c.seq + j, w, v_offset(c, g))];
          dp[j] = 0;
          for (int e = 0; e < d; ++e) {
            dp[j] += o_grad[e] * v[e];
            v_grad[e] += p * o_grad[e];
          }
          p_dot_dp += p * dp[j];
        }
        const double* q = &qkv[at(b * c.seq + i, w, q_offset(c, h))];
        double* q_grad = &dqkv[at(b * c.seq + i, w, q_offset(c, h))];
        for (int j = 0; j <= i; ++j) {
          const double ds = probs[prob_index(c, b, h, i, j)] * (dp[j] - p_dot_dp) * scale;
          const double* k = &qkv[at(b * c.seq + j, w, k_offset(c, g))];
          double* k_grad = &dqkv[at(b * c.seq + j, w, k_offset(c, g))];
          for (int e = 0; e < d; ++e) {
            q_grad[e] += ds * k[e];
            k_grad[e] += ds * q[e];
          }
        }
      }
    }
  }
  return dqkv;
}

// --- MLP activations ---------------------------------------------------------

// GELU, tanh approximation (Hendrycks & Gimpel 2016, section 2):
// 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))), as GPT-2 and Megatron.
constexpr double kGeluCubic = 0.044715;
double gelu_scale() { return std::sqrt(2.0 / std::numbers::pi); }

double gelu(double u) {
  return 0.5 * u * (1.0 + std::tanh(gelu_scale() * (u + kGeluCubic * u * u * u)));
}

double gelu_derivative(double u) {
  const double t = std::tanh(gelu_scale() * (u + kGeluCubic * u * u * u));
  return 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * gelu_scale() * (1.0 + 3.0 * kGeluCubic * u * u);
}

// SiLU (Swish with beta = 1): s(x) = x sigmoid(x); s'(x) = sigmoid(x) (1 + x (1 - sigmoid(x))).
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// GPT: g = gelu(u), u (rows, f). Llama: SwiGLU (Shazeer 2020, section 2,
// FFN_SwiGLU = (Swish_1(xW) * xV) W2), u (rows, 2 f) = [gate | up] per row,
// g = silu(gate) * up. Returns g (rows, f); f is the dense MLP's ffn_hidden or
// an expert's expert_ffn.
Vector mlp_activation_forward(const ReferenceConfig& c, int f, const Vector& u, int rows) {
  Vector g(static_cast<std::size_t>(rows) * f);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < f; ++i) {
      if (c.gpt()) {
        g[at(r, f, i)] = gelu(u[at(r, f, i)]);
      } else {
        const double gate = u[at(r, 2 * f, i)], up = u[at(r, 2 * f, f + i)];
        g[at(r, f, i)] = gate * sigmoid(gate) * up;
      }
    }
  }
  return g;
}

// The backward of mlp_activation_forward: returns du, shaped as u.
Vector mlp_activation_backward(const ReferenceConfig& c, int f, const Vector& u, const Vector& dg, int rows) {
  Vector du(u.size());
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < f; ++i) {
      const double d = dg[at(r, f, i)];
      if (c.gpt()) {
        du[at(r, f, i)] = d * gelu_derivative(u[at(r, f, i)]);
      } else {
        const double gate = u[at(r, 2 * f, i)], up = u[at(r, 2 * f, f + i)];
        const double s = sigmoid(gate);
        du[at(r, 2 * f, i)] = d * up * s * (1.0 + gate * (1.0 - s));
        du[at(r, 2 * f, f + i)] = d * gate * s;
      }
    }
  }
  return du;
}

// --- Mixture of experts ------------------------------------------------------

// A copy of `size` values of `w` from `offset`: one expert's block of rows.
Vector block(const Vector& w, std::size_t offset, std::size_t size) {
  return Vector(w.begin() + static_cast<std::ptrdiff_t>(offset),
                w.begin() + static_cast<std::ptrdiff_t>(offset + size));
}

// What the backward pass needs of an MoE layer. A (token t, choice j) pair is
// number t * topk + j; each expert's rows are its pairs in token order.
struct MoeCache {
  ReferenceMoeRouting routing;
  Vector probs;                          // (rows, experts) softmax of the logits
  std::vector<std::vector<int>> pairs;   // per expert: its pairs
  std::vector<Vector> in, u, g, out;     // per expert: (n_e, hidden), (n_e, fc1), (n_e, f), (n_e, hidden)
};

// The MoE MLP (Shazeer et al. 2017, eqs. 1, 3-5; Fedus et al. 2021; Megatron-
// Core's softmax-then-top-k router with normalised weights), per token t of
// m (rows, hidden):
//   z_t = Wr m_t;  p_t = softmax(z_t);  S_t = the topk experts of largest p
//   (ties: lower index first);  w_tj = p_{t,e_j} / sum_{l in S_t} p_{t,l}
//   (= the softmax of the selected logits);
//   y_t = sum_j w_tj E_{e_j}(m_t),  E_e(m) = W2_e act(W1_e m), no biases.
// And the Switch loss's statistics over the rows as one group (Fedus et al.
// 2021, eq. 4, f divided by k as Megatron-Core): f_i = count_i / (k T),
// P_i = (1/T) sum_t p_ti, routing.aux_loss = N sum_i f_i P_i. Returns y.
Vector moe_forward(const ReferenceConfig& c, const ReferenceLayer& l, const Vector& m, int rows,
                   MoeCache& cache) {
  const int hidden = c.hidden, E = c.experts, k = c.topk, fc1 = c.expert_fc1_dim(), f = c.expert_ffn;
  ReferenceMoeRouting& r = cache.routing;
  r.logits = linear_forward(m, rows, hidden, l.router_weight, {}, E);
  cache.probs.assign(r.logits.size(), 0.0);
  r.topk_ids.assign(static_cast<std::size_t>(rows) * k, 0);
  r.topk_weights.assign(static_cast<std::size_t>(rows) * k, 0.0);
  r.expert_tokens.assign(E, 0);
  r.min_selection_margin = std::numeric_limits<double>::infinity();
  cache.pairs.assign(E, {});
  std::vector<int> order(E);
  for (int t = 0; t < rows; ++t) {
    const double* z = &r.logits[at(t, E, 0)];
    double* p = &cache.probs[at(t, E, 0)];
    const double max_z = *std::max_element(z, z + E);
    double sum = 0;
    for (int e = 0; e < E; ++e) sum += p[e] = std::exp(z[e] - max_z);
    for (int e = 0; e < E; ++e) p[e] /= sum;
    for (int e = 0; e < E; ++e) order[e] = e;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    if (k < E) r.min_selection_margin = std::min(r.min_selection_margin, z[order[k - 1]] - z[order[k]]);
    double selected = 0;
    for (int j = 0; j < k; ++j) selected += p[order[j]];
    for (int j = 0; j < k; ++j) {
      const int e = order[j];
      r.topk_ids[at(t, k, j)] = e;
      r.topk_weights[at(t, k, j)] = p[e] / selected;
      ++r.expert_tokens[e];
      cache.pairs[e].push_back(t * k + j);
    }
  }

  r.aux_loss = 0;
  for (int e = 0; e < E; ++e) {
    double prob_sum = 0;
    for (int t = 0; t < rows; ++t) prob_sum += cache.probs[at(t, E, e)];
    const double f_e = r.expert_tokens[e] / (static_cast<double>(k) * rows);
    r.aux_loss += E * f_e * (prob_sum / rows);
  }

  Vector y(static_cast<std::size_t>(rows) * hidden, 0.0);
  cache.in.assign(E, {});
  cache.u.assign(E, {});
  cache.g.assign(E, {});
  cache.out.assign(E, {});
  for (int e = 0; e < E; ++e) {
    const std::vector<int>& pairs = cache.pairs[e];
    const int n = static_cast<int>(pairs.size());
    Vector& in = cache.in[e];
    in.resize(static_cast<std::size_t>(n) * hidden);
    for (int i = 0; i < n; ++i)
      std::copy_n(&m[at(pairs[i] / k, hidden, 0)], hidden, &in[at(i, hidden, 0)]);
    const Vector w1 = block(l.expert_fc1_weight, at(e, fc1, 0) * hidden, static_cast<std::size_t>(fc1) * hidden);
    const Vector w2 = block(l.expert_fc2_weight, at(e, hidden, 0) * f, static_cast<std::size_t>(hidden) * f);
    cache.u[e] = linear_forward(in, n, hidden, w1, {}, fc1);
    cache.g[e] = mlp_activation_forward(c, f, cache.u[e], n);
    cache.out[e] = linear_forward(cache.g[e], n, f, w2, {}, hidden);
    for (int i = 0; i < n; ++i) {
      const double weight = r.topk_weights[pairs[i]];
      for (int o = 0; o < hidden; ++o) y[at(pairs[i] / k, hidden, o)] += weight * cache.out[e][at(i, hidden, o)];
    }
  }
  return y;
}

// The backward of moe_forward for dL/dy = dy plus, when aux_loss_coeff > 0,
// d(aux_loss_coeff * routing.aux_loss): returns dm (rows, hidden) and adds to
// the router's and the experts' weight gradients. The selection and the
// counts are constants (piecewise: the loss is smooth where no selection ties).
//   dw_tj = <dy_t, E_{e_j}(m_t)>;  an expert's output gradient is w_tj dy_t;
//   dz_{t,e_j} = w_tj (dw_tj - sum_l w_tl dw_tl)   (softmax over the selected),
//   0 for the unselected;
//   aux: dL/dp_ti = alpha N f_i / T =: a_i, so
//   dz_ti += p_ti (a_i - sum_l p_tl a_l)   (softmax Jacobian);
//   dWr += dz^T m;  dm = sum_j (E_{e_j}'s input gradient) + dz Wr.
Vector moe_backward(const ReferenceConfig& c, const ReferenceLayer& l, ReferenceLayer& gl, const Vector& m,
                    int rows, const MoeCache& cache, const Vector& dy) {
  const int hidden = c.hidden, E = c.experts, k = c.topk, fc1 = c.expert_fc1_dim(), f = c.expert_ffn;
  const ReferenceMoeRouting& r = cache.routing;
  Vector dm(static_cast<std::size_t>(rows) * hidden, 0.0);
  Vector dweights(static_cast<std::size_t>(rows) * k, 0.0);
  for (int e = 0; e < E; ++e) {
    const std::vector<int>& pairs = cache.pairs[e];
    const int n = static_cast<int>(pairs.size());
    if (n == 0) continue;
    Vector dout(static_cast<std::size_t>(n) * hidden);
    for (int i = 0; i < n; ++i) {
      const int t = pairs[i] / k;
      const double weight = r.topk_weights[pairs[i]];
      double dot = 0;
      for (int o = 0; o < hidden; ++o) {
        dot += dy[at(t, hidden, o)] * cache.out[e][at(i, hidden, o)];
        dout[at(i, hidden, o)] = weight * dy[at(t, hidden, o)];
      }
      dweights[pairs[i]] = dot;
    }
    const std::size_t w1_offset = at(e, fc1, 0) * hidden, w1_size = static_cast<std::size_t>(fc1) * hidden;
    const std::size_t w2_offset = at(e, hidden, 0) * f, w2_size = static_cast<std::size_t>(hidden) * f;
    const Vector w1 = block(l.expert_fc1_weight, w1_offset, w1_size);
    const Vector w2 = block(l.expert_fc2_weight, w2_offset, w2_size);
    Vector dw1(w1_size, 0.0), dw2(w2_size, 0.0);
    const Vector dg = linear_backward(cache.g[e], n, f, w2, hidden, dout, dw2, nullptr);
    const Vector du = mlp_activation_backward(c, f, cache.u[e], dg, n);
    const Vector din = linear_backward(cache.in[e], n, hidden, w1, fc1, du, dw1, nullptr);
    for (std::size_t i = 0; i < w1_size; ++i) gl.expert_fc1_weight[w1_offset + i] += dw1[i];
    for (std::size_t i = 0; i < w2_size; ++i) gl.expert_fc2_weight[w2_offset + i] += dw2[i];
    for (int i = 0; i < n; ++i)
      for (int o = 0; o < hidden; ++o) dm[at(pairs[i] / k, hidden, o)] += din[at(i, hidden, o)];
  }

  Vector dlogits(static_cast<std::size_t>(rows) * E, 0.0);
  Vector aux_grad(E, 0.0);  // a_i = dL/dp_ti, the same for every token
  if (c.aux_loss_coeff > 0)
    for (int e = 0; e < E; ++e)
      aux_grad[e] = c.aux_loss_coeff * E * (r.expert_tokens[e] / (static_cast<double>(k) * rows)) / rows;
  for (int t = 0; t < rows; ++t) {
    double weighted = 0;
    for (int j = 0; j < k; ++j) weighted += r.topk_weights[at(t, k, j)] * dweights[at(t, k, j)];
    for (int j = 0; j < k; ++j) {
      const double w = r.topk_weights[at(t, k, j)];
      dlogits[at(t, E, r.topk_ids[at(t, k, j)])] += w * (dweights[at(t, k, j)] - weighted);
    }
    if (c.aux_loss_coeff > 0) {
      const double* p = &cache.probs[at(t, E, 0)];
      double mean_a = 0;
      for (int e = 0; e < E; ++e) mean_a += p[e] * aux_grad[e];
      for (int e = 0; e < E; ++e) dlogits[at(t, E, e)] += p[e] * (aux_grad[e] - mean_a);
    }
  }
  const Vector dm_router = linear_backward(m, rows, hidden, l.router_weight, E, dlogits, gl.router_weight, nullptr);
  for (std::size_t i = 0; i < dm.size(); ++i) dm[i] += dm_router[i];
  return dm;
}

// --- The whole model ---------------------------------------------------------

struct LayerActivations {
  Vector x_in;        // (rows, hidden) the residual stream entering the block
  NormCache norm1;
  Vector a;           // (rows, hidden) norm1(x_in)
  Vector qkv;         // (rows, qkv_dim) after the bias and (Llama) the rotation
  Vector probs;       // (batch, heads, seq, seq)
  Vector attn;        // (rows, q_dim) the heads' outputs side by side
  Vector x_mid;       // (rows, hidden) x_in + attention
  NormCache norm2;
  Vector m;           // (rows, hidden) norm2(x_mid)
  Vector u;           // (rows, fc1_dim) fc1's output (dense)
  Vector g;           // (rows, ffn) after GELU or SwiGLU (dense)
  MoeCache moe;       // (MoE)
};

struct Activations {
  std::vector<LayerActivations> layers;
  NormCache final_norm;
  Vector h;             // (rows, hidden) the final norm's output
  Vector logits;        // (rows, vocab)
  Vector token_losses;  // (rows)
  double aux_loss = 0;  // sum over MoE layers of aux_loss_coeff * routing.aux_loss (0 when off)
};

const Vector& output_weight(const ReferenceConfig& c, const ReferenceWeights& w) {
  return c.tie_embeddings ? w.wte : w.lm_head;  // Vaswani et al. 2017, section 3.4 when tied
}

// Pre-norm blocks (Radford et al. 2019, GPT-2, section 2.3): x += attn(norm1(x));
// x += mlp(norm2(x)); a final norm before the output projection.
Activations forward(const ReferenceConfig& c, const ReferenceWeights& w,
                    const std::vector<int>& tokens, const std::vector<int>& targets, int batch) {
  check(c, &w, &tokens, &targets, batch);
  const int rows = batch * c.seq, hidden = c.hidden;
  const bool layernorm = c.gpt();
  Activations act;

  // Token embedding plus (GPT) a learned position embedding (Vaswani et al.
  // 2017, section 3.5, the learned variant).
  Vector x(static_cast<std::size_t>(rows) * hidden);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < hidden; ++i) {
      const double position = c.gpt() ? w.wpe[at(r % c.seq, hidden, i)] : 0.0;
      x[at(r, hidden, i)] = w.wte[at(tokens[r], hidden, i)] + position;
    }
  }

  for (const ReferenceLayer& l : w.layers) {
    LayerActivations& la = act.layers.emplace_back();
    la.x_in = x;
    la.a = norm_forward(layernorm, x, rows, hidden, l.norm1_gamma, l.norm1_beta, c.norm_eps, la.norm1);
    la.qkv = linear_forward(la.a, rows, hidden, l.qkv_weight, l.qkv_bias, c.qkv_dim());
    if (!c.gpt()) rotate_queries_and_keys(c, la.qkv, rows, +1.0);
    la.attn = attention_forward(c, batch, la.qkv, la.probs);
    const Vector o = linear_forward(la.attn, rows, c.q_dim(), l.proj_weight, l.proj_bias, hidden);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    la.x_mid = x;
    la.m = norm_forward(layernorm, x, rows, hidden, l.norm2_gamma, l.norm2_beta, c.norm_eps, la.norm2);
    Vector y;
    if (c.moe()) {
      y = moe_forward(c, l, la.m, rows, la.moe);
      if (c.aux_loss_coeff > 0) act.aux_loss += c.aux_loss_coeff * la.moe.routing.aux_loss;
    } else {
      la.u = linear_forward(la.m, rows, hidden, l.fc1_weight, l.fc1_bias, c.fc1_dim());
      la.g = mlp_activation_forward(c, c.ffn_hidden, la.u, rows);
      y = linear_forward(la.g, rows, c.ffn_hidden, l.fc2_weight, l.fc2_bias, hidden);
    }
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  }

  act.h = norm_forward(layernorm, x, rows, hidden, w.final_norm_gamma, w.final_norm_beta, c.norm_eps,
                       act.final_norm);
  act.logits = linear_forward(act.h, rows, hidden, output_weight(c, w), {}, c.vocab);

  // Cross-entropy of the softmax over the vocabulary (Vaswani et al. 2017,
  // section 3.4), per token: logsumexp(logits) - logits[target].
  act.token_losses.assign(rows, 0.0);
  for (int r = 0; r < rows; ++r) {
    const double* z = &act.logits[at(r, c.vocab, 0)];
    const double max_z = *std::max_element(z, z + c.vocab);
    double sum = 0;
    for (int v = 0; v < c.vocab; ++v) sum += std::exp(z[v] - max_z);
    act.token_losses[r] = max_z + std::log(sum) - z[targets[r]];
  }
  return act;
}

double mean(const Vector& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

ReferenceWeights zeros_like(const ReferenceConfig& c) {
  ReferenceWeights z;
  z.layers.resize(c.num_layers);
  visit_tensors(z, c, [](const std::string&, Vector& tensor, std::size_t size) { tensor.assign(size, 0.0); });
  return z;
}

// The backward of forward() for the mean of the token losses plus act.aux_loss.
ReferenceWeights backward(const ReferenceConfig& c, const ReferenceWeights& w,
                          const std::vector<int>& tokens, const std::vector<int>& targets,
                          const Activations& act) {
  const int rows = static_cast<int>(tokens.size()), hidden = c.hidden;
  const bool layernorm = c.gpt();
  ReferenceWeights grad = zeros_like(c);

  // d(mean loss)/d logits = (softmax(logits) - onehot(target)) / rows.
  Vector dlogits(act.logits.size());
  for (int r = 0; r < rows; ++r) {
    const double* z = &act.logits[at(r, c.vocab, 0)];
    const double max_z = *std::max_element(z, z + c.vocab);
    double sum = 0;
    for (int v = 0; v < c.vocab; ++v) sum += std::exp(z[v] - max_z);
    for (int v = 0; v < c.vocab; ++v) {
      const double p = std::exp(z[v] - max_z) / sum;
      dlogits[at(r, c.vocab, v)] = (p - (v == targets[r] ? 1.0 : 0.0)) / rows;
    }
  }
  Vector& dhead = c.tie_embeddings ? grad.wte : grad.lm_head;
  const Vector dh =
      linear_backward(act.h, rows, hidden, output_weight(c, w), c.vocab, dlogits, dhead, nullptr);
  Vector dx(static_cast<std::size_t>(rows) * hidden, 0.0);  // the residual stream's gradient
  norm_backward(layernorm, dh, rows, hidden, w.final_norm_gamma, act.final_norm, dx,
                grad.final_norm_gamma, layernorm ? &grad.final_norm_beta : nullptr);

  for (int li = c.num_layers - 1; li >= 0; --li) {
    const ReferenceLayer& l = w.layers[li];
    ReferenceLayer& gl = grad.layers[li];
    const LayerActivations& la = act.layers[li];
    const int batch = rows / c.seq;

    // x_out = x_mid + fc2(act(fc1(norm2(x_mid)))) (or the MoE MLP): dx_mid = dx + the branch's.
    Vector dm;
    if (c.moe()) {
      dm = moe_backward(c, l, gl, la.m, rows, la.moe, dx);
    } else {
      const Vector dg = linear_backward(la.g, rows, c.ffn_hidden, l.fc2_weight, hidden, dx, gl.fc2_weight,
                                        c.gpt() ? &gl.fc2_bias : nullptr);
      const Vector du = mlp_activation_backward(c, c.ffn_hidden, la.u, dg, rows);
      dm = linear_backward(la.m, rows, hidden, l.fc1_weight, c.fc1_dim(), du, gl.fc1_weight,
                           c.gpt() ? &gl.fc1_bias : nullptr);
    }
    norm_backward(layernorm, dm, rows, hidden, l.norm2_gamma, la.norm2, dx, gl.norm2_gamma,
                  layernorm ? &gl.norm2_beta : nullptr);

    // x_mid = x_in + proj(attention(qkv(norm1(x_in)))): dx_in = dx_mid + the branch's.
    const Vector dattn = linear_backward(la.attn, rows, c.q_dim(), l.proj_weight, hidden, dx, gl.proj_weight,
                                         c.gpt() ? &gl.proj_bias : nullptr);
    Vector dqkv = attention_backward(c, batch, la.qkv, la.probs, dattn);
    if (!c.gpt()) rotate_queries_and_keys(c, dqkv, rows, -1.0);
    const Vector da = linear_backward(la.a, rows, hidden, l.qkv_weight, c.qkv_dim(), dqkv, gl.qkv_weight,
                                      c.gpt() ? &gl.qkv_bias : nullptr);
    norm_backward(layernorm, da, rows, hidden, l.norm1_gamma, la.norm1, dx, gl.norm1_gamma,
                  layernorm ? &gl.norm1_beta : nullptr);
  }

  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < hidden; ++i) {
      grad.wte[at(tokens[r], hidden, i)] += dx[at(r, hidden, i)];
      if (c.gpt()) grad.wpe[at(r % c.seq, hidden, i)] += dx[at(r, hidden, i)];
    }
  }
  return grad;
}

}  // namespace

double reference_loss(const ReferenceConfig& config, const ReferenceWeights& weights,
                      const std::vector<int>& tokens, const std::vector<int>& targets, int batch) {
  const Activations act = forward(config, weights, tokens, targets, batch);
  return mean(act.token_losses) + act.aux_loss;
}

double reference_loss_and_gradients(const ReferenceConfig& config, const ReferenceWeights& weights,
                                    const std::vector<int>& tokens, const std::vector<int>& targets,
                                    int batch, ReferenceWeights* gradients) {
  if (gradients == nullptr) throw std::invalid_argument("reference model: gradients is null");
  const Activations act = forward(config, weights, tokens, targets, batch);
  *gradients = backward(config, weights, tokens, targets, act);
  return mean(act.token_losses) + act.aux_loss;
}

std::vector<double> reference_token_losses(const ReferenceConfig& config,
                                           const ReferenceWeights& weights,
                                           const std::vector<int>& tokens,
                                           const std::vector<int>& targets, int batch) {
  return forward(config, weights, tokens, targets, batch).token_losses;
}

std::vector<ReferenceMoeRouting> reference_moe_routing(const ReferenceConfig& config,
                                                       const ReferenceWeights& weights,
                                                       const std::vector<int>& tokens, int batch) {
  std::vector<ReferenceMoeRouting> routing;
  if (!config.moe()) {
    check(config, &weights, &tokens, &tokens, batch);
    return routing;
  }
  // The targets do not change the routing; the tokens are valid ones.
  Activations act = forward(config, weights, tokens, tokens, batch);
  for (LayerActivations& la : act.layers) routing.push_back(std::move(la.moe.routing));
  return routing;
}

ReferenceWeights reference_random_weights(const ReferenceConfig& config, std::uint64_t seed,
                                          double scale) {
  check(config, nullptr, nullptr, nullptr, 0);
  ReferenceWeights w;
  w.layers.resize(config.num_layers);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-scale, scale);
  visit_tensors(w, config, [&](const std::string& name, Vector& tensor, std::size_t size) {
    const double center = name.ends_with("gamma") ? 1.0 : 0.0;
    tensor.resize(size);
    for (double& v : tensor) v = center + uniform(rng);
  });
  return w;
}

void for_each_tensor(
    ReferenceWeights& weights, const ReferenceConfig& config,
    const std::function<void(const std::string& name, std::vector<double>& tensor)>& visit) {
  if (static_cast<int>(weights.layers.size()) != config.num_layers)
    throw std::invalid_argument("for_each_tensor: weights have " + std::to_string(weights.layers.size()) +
                                " layers, config " + std::to_string(config.num_layers));
  visit_tensors(weights, config,
                [&](const std::string& name, Vector& tensor, std::size_t) { visit(name, tensor); });
}

void reference_rope(std::span<double> head, int position, double theta) {
  if (head.size() % 2 != 0)
    throw std::invalid_argument("reference_rope: head_dim (" + std::to_string(head.size()) +
                                ") must be even");
  rotate(head, position, theta, +1.0);
}

}  // namespace sextant::engine::testing
