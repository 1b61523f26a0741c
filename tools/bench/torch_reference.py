#!/usr/bin/env python3
"""Train the model of a sextant preset with plain PyTorch, as the yardstick of the engine's speed.

The model is the one `sextant run` trains (engine/model/parameter_layout.h, engine/transformer.cc),
built from the same configs/models/*.yaml:
  GPT family   token embedding + learned positions; per layer pre-LayerNorm (eps 1e-5), fused QKV
               linear whose output is [Q heads | K heads | V heads], causal SDPA, output projection,
               residual, pre-LayerNorm, fc1 + GELU (tanh) + fc2, residual; final LayerNorm; LM head
               tied to the embedding when tie_embeddings. Biases on every linear (add_bias_linear).
  Llama family RMSNorm, no biases, rotary embeddings (rotate-half), SwiGLU with fc1 = [gate | up],
               grouped-query attention, untied LM head.
  Each feature follows its own key, as in the engine (sim/core/config_loader.cc defaults:
  position_embedding_type learned_absolute, add_bias_linear true, tie_embeddings false).
  Init: N(0, 0.02); the projections feeding the residual (attention output, fc2) N(0, 0.02/sqrt(2L))
  (Megatron's scaled_init_method_normal; Radford et al. 2019). Biases 0, norm gains 1.
  Dropout: none (the engine has none).
  MoE presets (`moe:` num_experts E, router_topk k, ffn_hidden_size f; first_dense_layers dense
               layers first; no shared experts, no biases): the MLP of each MoE layer as
               engine/transformer/moe_layer.h (Megatron-Core's MoELayer, dropless): router logits
               x Wr^T with x and Wr cast to fp32, softmax over the E experts, top-k, the k weights
               renormalised to sum 1; the Switch loss (Fedus et al. 2021) alpha E sum_i f_i P_i,
               f_i = pairs routed to i / (k T), P_i = expert i's mean probability over the T tokens,
               alpha = --moe-aux-loss-coeff (default 1e-2), summed over layers and added to the
               loss; the T k pairs sorted by expert (torch.argsort, stable), each expert's
               fc1 -> SwiGLU (GELU) -> fc2, then out[t] = sum_j w_tj y_(t,j) (index_add in fp32).
               Weights as the engine's layout: router_weight (E, h), expert_fc1_weight
               (E, 2f, h) rows [gate | up] per expert, expert_fc2_weight (E, h, f); init router and
               fc1 N(0, 0.02), fc2 N(0, 0.02/sqrt(2L)).
               --moe-impl grouped: torch._grouped_mm (PyTorch >= 2.8; bf16 CUTLASS kernels on
               sm90) over all experts, offs = int32 cumulative row ends on the GPU, mat_b the
               (E, in, out) transposed view of the (E, out, in) weight, no host sync; loop: one
               F.linear per expert over its rows, the rows per expert read to the host (a sync,
               as Megatron's tokens_per_expert.cpu()); auto (default): grouped if a probe (forward,
               backward, compared with per-expert matmuls, at the model's shapes) passes, else
               loop. A grouped request that fails the probe falls back to loop and says why in
               "moe_impl_fallback"; "moe_impl_used" names what ran. If torch.compile fails on an
               MoE model the run goes on eager: "compiled": false, "compile_error" (the loop's
               .tolist() is a graph break, which compile accepts).

Training: random tokens drawn on the GPU (a new batch each step), mean cross-entropy, AdamW
(fused, lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices only, as the engine),
gradient clipping at norm 1.0.
  --mode amp   fp32 weights, forward under torch.autocast(bfloat16), TF32 for fp32 matmuls
  --mode bf16  weights, gradients and Adam moments all bf16 (model.to(bfloat16))
torch.compile(model) unless --no-compile; the loss is computed inside the compiled module, so the
compiler may fuse the cross-entropy with the logits.

Timing: --warmup steps first (they include compilation), then --steps timed steps, each bracketed
by torch.cuda.synchronize() and time.perf_counter(); the step time is the median of the timed steps.
  tokens/s        = mbs * seq / median step time
  flops_per_token = 6 P + 12 L (heads * head_dim) s   (Narayanan et al. 2021, eq. 3; PaLM, Chowdhery
                    et al. 2022, appendix B): P = every parameter, the embedding counted once when
                    tied, learned positions, biases and norms included; attention counted over the
                    full s x s matrix although the kernel is causal.
                    MoE (eq. 3 adapted to active parameters, as Megatron's MoE FLOP count): P =
                    the active parameters, i.e. per MoE layer the router (E h: 6 E h FLOPs per
                    token) and k experts' fc1 + fc2 (6 k (2f h + f h) for SwiGLU) in place of
                    all E experts; routing, top-k, permutation and aux loss are not counted
  MFU             = flops_per_token * tokens/s / --peak-flops
Memory: torch.cuda.max_memory_allocated / max_memory_reserved over the whole run, and the device
memory in use (cudaMemGetInfo: total - free, CUDA context included, as `sextant run` reports it),
sampled after every step.

Usage:
  python3 tools/bench/torch_reference.py --model gpt-1.3b --mbs 4 --steps 30 --warmup 10 \\
      --mode amp --json
  python3 tools/bench/torch_reference.py --model configs/models/llama3-8b.yaml --mbs 1 \\
      --seq-length 4096 --mode bf16 --dry-run       # no torch needed: shapes, parameters, FLOPs
  python3 tools/bench/torch_reference.py --model moe-mixtral-tiny --mbs 2 --mode bf16 \\
      --moe-impl grouped --json                     # MoE; the JSON has active_parameters too

With --json the last line of stdout is one JSON object (keys below, see result_record); progress
goes to stderr. Out of GPU memory is an outcome, not a crash: the JSON line carries
"error": "out of memory" and the exit code is 0. Other failures: "error" with the exception, exit 1.
Bad arguments or a bad model file: messages on stderr, exit 2.

The config, parameter and FLOP functions import no torch, so engine_vs_pytorch.py uses them too.
"""

import argparse
import contextlib
import dataclasses
import json
import math
import os
import re
import statistics
import sys
import time
import traceback

try:
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:  # --dry-run, the config and FLOP functions work without torch
    torch = nn = F = None

REPO_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MODELS_DIR = os.path.join(REPO_ROOT, "configs", "models")

# NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 SXM5: BF16 Tensor 989.4 TFLOPS dense
# (configs/gpus/h100-sxm-80gb.yaml, the preset `sextant run` divides by on an H100).
H100_SXM_PEAK_BF16_FLOPS_PER_S = 989.4e12

NORM_EPS = 1e-5         # Megatron's --norm-epsilon default; engine/model/transformer_shape.h
ROTARY_BASE = 10000.0   # Su et al. 2021, eq. 15; Megatron's --rotary-base default
INIT_STD = 0.02         # Megatron's --init-method-std default; `sextant run --init-method-std`
LR = 3e-4
ADAM_BETAS = (0.9, 0.95)
ADAM_EPS = 1e-8
WEIGHT_DECAY = 0.1
GRAD_CLIP = 1.0
GIB = 1024 ** 3


# ----------------------------------------------------------------------------- model config

class ConfigError(Exception):
    """Every problem found in a model file, each as 'file:line:col: key: message'."""

    def __init__(self, problems):
        super().__init__("\n".join(problems))
        self.problems = list(problems)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_query_groups: int
    head_dim: int              # kv_channels
    vocab_size: int
    seq_length: int            # the training sequence length (--seq-length overrides the file's)
    gelu: bool                 # else SwiGLU
    layernorm: bool            # else RMSNorm
    tie_embeddings: bool
    rope: bool                 # else learned absolute positions
    add_bias_linear: bool
    rotary_base: float
    # Mixture of experts (the preset's `moe:` block); num_experts 0 = dense.
    num_experts: int = 0
    router_topk: int = 0
    moe_ffn_hidden_size: int = 0   # each expert's ffn width
    moe_first_dense_layers: int = 0

    @property
    def is_moe(self):
        return self.num_experts > 0

    def layer_is_moe(self, layer):
        return self.is_moe and layer >= self.moe_first_dense_layers

    @property
    def num_moe_layers(self):
        return self.num_layers - self.moe_first_dense_layers if self.is_moe else 0

    @property
    def expert_fc1_width(self):
        """An expert's fc1 output: f for GELU, [gate | up] = 2 f for SwiGLU."""
        return self.moe_ffn_hidden_size if self.gelu else 2 * self.moe_ffn_hidden_size

    @property
    def q_width(self):
        return self.num_attention_heads * self.head_dim

    @property
    def kv_width(self):
        return self.num_query_groups * self.head_dim

    @property
    def qkv_width(self):
        return self.q_width + 2 * self.kv_width

    @property
    def fc1_width(self):
        """fc1's output: ffn for GELU, [gate | up] = 2 ffn for SwiGLU."""
        return self.ffn_hidden_size if self.gelu else 2 * self.ffn_hidden_size

    def describe(self):
        return (f"{self.name}: {self.num_layers} layers, hidden {self.hidden_size}, "
                f"ffn {self.ffn_hidden_size}, heads {self.num_attention_heads} "
                f"(kv {self.num_query_groups}) x {self.head_dim}, vocab {self.vocab_size}, "
                f"seq {self.seq_length}, {'gelu' if self.gelu else 'swiglu'}, "
                f"{'layernorm' if self.layernorm else 'rmsnorm'}, "
                f"{'rope' if self.rope else 'learned positions'}, "
                f"{'biases' if self.add_bias_linear else 'no biases'}, "
                f"{'tied' if self.tie_embeddings else 'untied'} embeddings"
                + (f"; MoE {self.num_experts} experts top-{self.router_topk}, expert ffn "
                   f"{self.moe_ffn_hidden_size}, {self.num_moe_layers} of {self.num_layers} "
                   f"layers" if self.is_moe else ""))


_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:")


def _strip_comment(line):
    """The line without its '# comment' (a '#' inside quotes, or not after a blank, is kept)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _scalar(text):
    """A YAML scalar as these presets write them: quoted string, int, float, bool, null, word."""
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        return t[1:-1]
    if t in ("", "~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if re.fullmatch(r"[-+]?[0-9]+", t):
        return int(t)
    if re.fullmatch(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", t):
        return float(t)
    return t


def parse_flat_yaml(text, path):
    """The subset of YAML the model presets use: `key: scalar` lines, comments, and one level of
    nested `key:` blocks (read into a dict, so that `moe:` is seen). Used when PyYAML is missing.
    Raises ConfigError for any line outside that subset, naming it."""
    result, problems = {}, []
    block = None  # the dict of the open nested block
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw).rstrip()
        if not line.strip():
            continue
        indented = line[0] in " \t"
        m = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:(\s+(.*))?$", line)
        if not m:
            problems.append(f"{path}:{number}:1: expected `key: value` (this reader takes flat "
                            f"presets; install PyYAML for full YAML)")
            continue
        key, value = m.group(1), (m.group(3) or "").strip()
        if indented:
            if block is None:
                problems.append(f"{path}:{number}:1: {key}: indented line outside a block")
            else:
                block[key] = _scalar(value)
            continue
        if value == "":
            block = {}
            result[key] = block
        else:
            block = None
            result[key] = _scalar(value)
    if problems:
        raise ConfigError(problems)
    return result


def load_yaml(path):
    """(mapping, {top-level key: line}) of a model file; PyYAML when importable."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError([f"{path}:0:0: cannot read the model file ({e.strerror})"])
    lines = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        m = _KEY_LINE.match(raw)
        if m:
            lines.setdefault(m.group(1), number)
    try:
        import yaml
    except ImportError:
        data = parse_flat_yaml(text, path)
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError([f"{path}:0:0: not valid YAML: {e}"])
    if not isinstance(data, dict):
        raise ConfigError([f"{path}:1:1: expected a mapping of key: value"])
    return data, lines


# Keys the engine's loader accepts (sim/core/config_loader.cc), plus rotary_base.
_KNOWN_KEYS = ("name", "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
               "num_query_groups", "kv_channels", "vocab_size", "seq_length", "activation",
               "normalization", "tie_embeddings", "position_embedding_type", "add_bias_linear",
               "rotary_base", "hidden_dropout", "attention_dropout", "moe", "source")


def model_spec_from_mapping(data, path, lines=None, seq_length=None, warn=None):
    """The ModelSpec of one preset mapping, every problem reported at once as a ConfigError.
    `seq_length` (when given) replaces the file's; `warn` receives notes that are not errors."""
    lines = lines or {}
    problems = []

    def report(key, message):
        problems.append(f"{path}:{lines.get(key, 0)}:{1 if key in lines else 0}: {key}: {message}")

    def integer(key, required=True, default=None):
        if key not in data or data[key] is None:
            if required:
                report(key, "missing (a positive integer)")
            return default
        v = data[key]
        if isinstance(v, bool) or not isinstance(v, int):
            report(key, f"got {v!r}; expected a positive integer")
            return default
        if v < 1:
            report(key, f"got {v}; must be at least 1")
            return default
        return v

    def boolean(key, default):
        v = data.get(key, default)
        if v is None:
            return default
        if not isinstance(v, bool):
            report(key, f"got {v!r}; accepted: true, false")
            return default
        return v

    def choice(key, accepted, default=None):
        if key not in data or data[key] is None:
            if default is None:
                report(key, f"missing; accepted: {', '.join(accepted)}")
            return default
        v = data[key]
        if v not in accepted:
            report(key, f"got {v!r}; accepted: {', '.join(accepted)}")
            return default
        return v

    def number(key, default):
        v = data.get(key, default)
        if isinstance(v, str):  # PyYAML reads 5e5 (no dot) as a string: YAML 1.1
            v = _scalar(v)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            report(key, f"got {v!r}; expected a number")
            return default
        return float(v)

    name = data.get("name")
    if not isinstance(name, str) or not name:
        report("name", f"got {name!r}; expected a string")
        name = os.path.splitext(os.path.basename(path))[0]
    layers = integer("num_layers")
    hidden = integer("hidden_size")
    ffn = integer("ffn_hidden_size")
    heads = integer("num_attention_heads")
    groups = integer("num_query_groups", required=False, default=heads)
    if heads and groups and heads % groups:
        report("num_query_groups", f"{groups} must divide num_attention_heads ({heads})")
    head_dim = integer("kv_channels", required=False)
    if head_dim is None and "kv_channels" not in data and heads and hidden:
        if hidden % heads:
            report("num_attention_heads",
                   f"{heads} must divide hidden_size ({hidden}) unless kv_channels is given")
        else:
            head_dim = hidden // heads
    vocab = integer("vocab_size")
    seq = integer("seq_length")
    if seq_length is not None:
        seq = seq_length
    activation = choice("activation", ("gelu", "swiglu"))
    normalization = choice("normalization", ("layernorm", "rmsnorm"))
    position = choice("position_embedding_type", ("learned_absolute", "rope"),
                      default="learned_absolute")
    tie = boolean("tie_embeddings", False)
    bias = boolean("add_bias_linear", True)
    rotary_base = number("rotary_base", ROTARY_BASE)
    if rotary_base <= 0:
        report("rotary_base", f"got {rotary_base!r}; must be positive")
        rotary_base = ROTARY_BASE
    if position == "rope" and head_dim and head_dim % 2:
        report("kv_channels", f"head dimension {head_dim} must be even for rotary embeddings")
    moe = data.get("moe")
    experts = topk = moe_ffn = first_dense = 0
    if moe not in (None, {}):
        if not isinstance(moe, dict):
            report("moe", f"got {moe!r}; expected a block of num_experts, router_topk, "
                          f"ffn_hidden_size")
        else:
            def moe_int(key, required, default=0, minimum=1):
                v = moe.get(key)
                if v is None:
                    if required:
                        report("moe", f"{key}: missing (a positive integer)")
                    return default
                if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
                    report("moe", f"{key}: got {v!r}; expected an integer >= {minimum}")
                    return default
                return v
            experts = moe_int("num_experts", True)
            topk = moe_int("router_topk", True)
            moe_ffn = moe_int("ffn_hidden_size", True)
            first_dense = moe_int("first_dense_layers", False, minimum=0)
            shared = moe_int("shared_expert_ffn_hidden_size", False, minimum=0)
            if experts and topk and topk > experts:
                report("moe", f"router_topk {topk} must be at most num_experts ({experts})")
            if layers and first_dense >= layers:
                report("moe", f"first_dense_layers {first_dense} must be below num_layers ({layers})")
            if shared:
                report("moe", "shared_expert_ffn_hidden_size > 0: shared experts are not "
                              "modelled by this reference")
            if bias:
                report("add_bias_linear", "true with moe: expert biases are not modelled by "
                                          "this reference (the MoE presets have none)")
            extra = sorted(set(moe) - {"num_experts", "router_topk", "ffn_hidden_size",
                                       "first_dense_layers", "shared_expert_ffn_hidden_size",
                                       "expert_load_factor"})
            if extra:
                report("moe", f"unknown key(s) {', '.join(extra)}")
            if moe.get("expert_load_factor") not in (None, 1, 1.0) and warn:
                warn(f"{path}: moe.expert_load_factor ignored (a simulator setting; the "
                     f"reference routes what the router chooses)")
    for key in ("hidden_dropout", "attention_dropout"):
        v = number(key, 0.0)
        if v and warn:
            warn(f"{path}: {key} {v} ignored: the engine has no dropout, neither does this reference")
    unknown = sorted(set(data) - set(_KNOWN_KEYS))
    if unknown and warn:
        warn(f"{path}: ignored key(s) {', '.join(unknown)}")
    if problems:
        raise ConfigError(problems)
    return ModelSpec(name=name, num_layers=layers, hidden_size=hidden, ffn_hidden_size=ffn,
                     num_attention_heads=heads, num_query_groups=groups, head_dim=head_dim,
                     vocab_size=vocab, seq_length=seq, gelu=activation == "gelu",
                     layernorm=normalization == "layernorm", tie_embeddings=tie,
                     rope=position == "rope", add_bias_linear=bias,
                     rotary_base=float(rotary_base), num_experts=experts, router_topk=topk,
                     moe_ffn_hidden_size=moe_ffn, moe_first_dense_layers=first_dense)


def resolve_model_path(name_or_path):
    """A preset name (configs/models/NAME.yaml of this repository) or a path, as `sextant` does."""
    if "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        return name_or_path
    return os.path.join(MODELS_DIR, name_or_path + ".yaml")


def load_model_spec(name_or_path, seq_length=None, warn=None):
    path = resolve_model_path(name_or_path)
    if not os.path.isfile(path):
        raise ConfigError([f"{path}:0:0: --model: no such model file"
                           + ("" if path == name_or_path else
                              f" (preset '{name_or_path}' looked up in {MODELS_DIR})")])
    data, lines = load_yaml(path)
    return model_spec_from_mapping(data, path, lines, seq_length=seq_length, warn=warn)


# ----------------------------------------------------------------------------- counts

def expert_parameter_count(spec):
    """One expert's weights: fc1 (fc1 width, h) and fc2 (h, f); no biases (refused with MoE)."""
    return spec.hidden_size * spec.expert_fc1_width + spec.moe_ffn_hidden_size * spec.hidden_size


def parameter_count(spec, active=False):
    """Every parameter the model holds; a tied embedding once. Equals the engine's
    ParameterLayout::parameter_count() and, on the GPU, sum(p.numel()) of the module below.
    An MoE layer holds the router (experts, h) and every expert's fc1 and fc2 in place of fc1 and
    fc2. active=True: the parameters one token uses, i.e. only router_topk experts per MoE layer
    (the router, attention, norms and embeddings in full); the same as the total for dense models."""
    h, b = spec.hidden_size, spec.add_bias_linear
    norm = 2 * h if spec.layernorm else h
    attention = (2 * norm
                 + h * spec.qkv_width + (spec.qkv_width if b else 0)
                 + spec.q_width * h + (h if b else 0))
    dense_mlp = (h * spec.fc1_width + (spec.fc1_width if b else 0)
                 + spec.ffn_hidden_size * h + (h if b else 0))
    experts_used = spec.router_topk if active else spec.num_experts
    moe_mlp = spec.num_experts * h + experts_used * expert_parameter_count(spec)
    total = (spec.vocab_size * h + spec.num_layers * attention
             + (spec.num_layers - spec.num_moe_layers) * dense_mlp
             + spec.num_moe_layers * moe_mlp + norm)
    if not spec.rope:
        total += spec.seq_length * h
    if not spec.tie_embeddings:
        total += spec.vocab_size * h
    return total


def flops_per_token(spec, seq_length=None):
    """Model FLOPs of one trained token (forward + backward): 6 P + 12 L (a d) s.
    Narayanan et al. 2021 (SC'21), eq. 3, and Chowdhery et al. 2022 (PaLM), appendix B: 2 FLOPs
    per multiply-add, backward twice the forward; attention over the full s x s matrix.
    MoE: P = the active parameters (parameter_count(spec, active=True)), as Megatron's MoE FLOP
    count does: per MoE layer router_topk experts' fc1 + fc2 (6 x their weights), the router
    (6 h E), attention and the rest as dense. Routing, softmax, top-k, the permutation and the
    auxiliary loss are not counted (no matmuls)."""
    s = spec.seq_length if seq_length is None else seq_length
    return 6 * parameter_count(spec, active=True) + 12 * spec.num_layers * spec.q_width * s


def mfu(spec, tokens_per_s, peak_flops_per_s, seq_length=None):
    return flops_per_token(spec, seq_length) * tokens_per_s / peak_flops_per_s


# ----------------------------------------------------------------------------- the model
# nn.Module exists only with torch; without it the classes are defined but never built.

_Module = nn.Module if nn is not None else object


def _norm(spec):
    h = spec.hidden_size
    if spec.layernorm:
        return nn.LayerNorm(h, eps=NORM_EPS)
    if hasattr(nn, "RMSNorm"):  # PyTorch >= 2.4
        return nn.RMSNorm(h, eps=NORM_EPS)
    return _RmsNorm(h, NORM_EPS)


class _RmsNorm(_Module):
    """x * rsqrt(mean(x^2) + eps) * gain (Zhang & Sennrich 2019), for PyTorch < 2.4."""

    def __init__(self, h, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(h))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.to(x.dtype) * self.weight


def rotary_tables(spec, seq, device):
    """cos, sin: (seq, head_dim / 2) fp32, angle = t * base^(-2i/d) (kernels/qkv_layout.h)."""
    d = spec.head_dim
    inv_freq = spec.rotary_base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=device) / d)
    angle = torch.arange(seq, dtype=torch.float64, device=device)[:, None] * inv_freq[None, :]
    return angle.cos().float(), angle.sin().float()


def apply_rotary(x, cos, sin):
    """Rotate-half RoPE (GPT-NeoX, HF Llama, Megatron) in fp32. x: (b, s, heads, d)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


def _sdpa_takes_enable_gqa():
    major, minor = (int(p) for p in re.findall(r"\d+", torch.__version__)[:2])
    return (major, minor) >= (2, 5)


MOE_IMPLS = ("grouped", "loop", "auto")
MOE_AUX_LOSS_COEFF = 1e-2  # Megatron's --moe-aux-loss-coeff as the engine defaults it (moe_options.h)


def _activation(spec, u):
    if spec.gelu:
        return F.gelu(u, approximate="tanh")
    gate, up = u.chunk(2, dim=-1)
    return F.silu(gate) * up


def grouped_mm_problem(device, dtype, spec):
    """None when torch._grouped_mm runs forward and backward here at this model's expert shapes
    (uneven groups, an empty one included) and agrees with per-expert matmuls; else why not."""
    if not hasattr(torch, "_grouped_mm"):
        return f"torch {torch.__version__} has no torch._grouped_mm (PyTorch >= 2.8 needed)"
    try:
        e, h, w = spec.num_experts, spec.hidden_size, spec.expert_fc1_width
        gen = torch.Generator(device=device).manual_seed(0)
        sizes = [(16 * i + 8) % 40 for i in range(e)]  # 8, 24, 0, 16, ... uneven, one empty
        sizes[-1] = 0
        rows = sum(sizes)
        x = torch.randn(rows, h, device=device, generator=gen).to(torch.bfloat16).requires_grad_()
        wt = (torch.randn(e, w, h, device=device, generator=gen) * 0.02).to(dtype).requires_grad_()
        offs = torch.tensor(sizes, device=device).cumsum(0).to(torch.int32)
        out = torch._grouped_mm(x, wt.to(torch.bfloat16).transpose(-2, -1), offs=offs)
        out.float().square().sum().backward()
        ref_out = torch.cat([xi @ wt[i].to(torch.bfloat16).t()
                             for i, xi in enumerate(x.detach().split(sizes))])
        torch.cuda.synchronize(device)
        if out.shape != ref_out.shape or not torch.allclose(out.float(), ref_out.float(),
                                                            rtol=2e-2, atol=2e-2):
            return "torch._grouped_mm disagrees with per-expert matmuls"
        if x.grad is None or wt.grad is None or not bool(torch.isfinite(wt.grad).all()):
            return "torch._grouped_mm's backward gave no or non-finite gradients"
    except Exception as error:  # noqa: BLE001 -- any failure means: use the loop
        return f"torch._grouped_mm failed: {type(error).__name__}: {str(error)[:300]}"
    return None


class MoeMlp(_Module):
    """The MLP of an MoE layer as engine/transformer/moe_layer.h computes it (Megatron-Core's
    MoELayer, dropless, one rank): router logits (T, E) = x Wr^T in fp32, softmax over experts,
    top-k, the k weights renormalised to sum 1; the Switch auxiliary loss (Fedus et al. 2021)
    alpha E sum_i f_i P_i, f_i = tokens routed to i / (k T), P_i = mean router probability of i;
    the T k (token, choice) pairs sorted by expert (stable), each expert's fc1, activation, fc2
    on its rows, then out[t] = sum_j w_tj * expert output of (t, j).
    Parameters (engine names): router_weight (E, h), expert_fc1_weight (E, fc1 width, h) with each
    expert's rows [gate | up], expert_fc2_weight (E, h, f); PyTorch's (out, in) per expert.
    impl "grouped": torch._grouped_mm over all experts at once (no host sync);
    "loop": one matmul per expert over its rows (the rows per expert read to the host, a sync)."""

    def __init__(self, spec, impl, aux_loss_coeff):
        super().__init__()
        self.spec = spec
        self.impl = impl
        self.aux_loss_coeff = aux_loss_coeff
        e, h = spec.num_experts, spec.hidden_size
        self.router_weight = nn.Parameter(torch.empty(e, h))
        self.expert_fc1_weight = nn.Parameter(torch.empty(e, spec.expert_fc1_width, h))
        self.expert_fc2_weight = nn.Parameter(torch.empty(e, h, spec.moe_ffn_hidden_size))

    def _experts_grouped(self, xs, counts):
        offs = counts.cumsum(0).to(torch.int32)  # each expert's end row, on the device
        bf16 = torch.bfloat16
        u = torch._grouped_mm(xs.to(bf16), self.expert_fc1_weight.to(bf16).transpose(-2, -1),
                              offs=offs)
        a = _activation(self.spec, u)
        return torch._grouped_mm(a, self.expert_fc2_weight.to(bf16).transpose(-2, -1), offs=offs)

    def _experts_loop(self, xs, counts):
        outs = []
        for i, xi in enumerate(xs.split(counts.tolist())):  # .tolist(): a host sync
            a = _activation(self.spec, F.linear(xi, self.expert_fc1_weight[i]))
            outs.append(F.linear(a, self.expert_fc2_weight[i]))
        return torch.cat(outs)

    def forward(self, x):  # x: (b, s, h) -> (out (b, s, h), aux loss scalar fp32)
        sp = self.spec
        shape = x.shape
        xt = x.reshape(-1, shape[-1])  # (T, h)
        tokens, k, e = xt.shape[0], sp.router_topk, sp.num_experts
        with torch.autocast(device_type=x.device.type, enabled=False):
            logits = F.linear(xt.float(), self.router_weight.float())  # (T, E) fp32
        probs = logits.softmax(dim=-1)
        top_p, top_ids = probs.topk(k, dim=-1)  # (T, k)
        top_w = top_p / top_p.sum(dim=-1, keepdim=True)
        flat_ids = top_ids.reshape(-1)  # (T k), pair p = t k + j
        counts = torch.bincount(flat_ids, minlength=e)  # (E) pairs per expert
        # Switch loss: alpha E sum_i (count_i / (k T)) * mean_t probs[t, i]; counts carry no gradient.
        aux = (self.aux_loss_coeff * e
               * (counts.float() / (k * tokens) * probs.mean(dim=0)).sum())
        order = torch.argsort(flat_ids, stable=True)  # pairs sorted by expert
        token_of = order // k
        xs = xt[token_of]  # (P, h): the permuted rows
        if self.impl == "grouped":
            y = self._experts_grouped(xs, counts)
        else:
            y = self._experts_loop(xs, counts)
        y = y * top_w.reshape(-1)[order].to(y.dtype)[:, None]
        out = torch.zeros(tokens, shape[-1], dtype=torch.float32, device=x.device)
        out = out.index_add(0, token_of, y.float())  # the un-permutation, summed in fp32
        return out.to(x.dtype).reshape(shape), aux


def causal_attention(q, k, v, enable_gqa):
    """Causal SDPA: q (b, heads, s, d), k and v (b, groups, s, d) -> (b, heads, s, d).
    enable_gqa: SDPA's own grouped-query attention (PyTorch >= 2.5); else, when groups < heads,
    K and V heads are repeated (query head i reads kv head i // (heads / groups)).
    F.scaled_dot_product_attention is looked up at each call, so PyTorch's context_parallel()
    (which replaces it inside its context) takes effect."""
    if enable_gqa:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    if k.shape[1] != q.shape[1]:
        r = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Block(_Module):
    """One pre-norm transformer layer; tensor names follow the engine's parameter layout."""

    def __init__(self, spec, moe=None):
        super().__init__()
        self.spec = spec
        h, bias = spec.hidden_size, spec.add_bias_linear
        self.norm1 = _norm(spec)
        self.qkv = nn.Linear(h, spec.qkv_width, bias=bias)  # rows [Q heads | K heads | V heads]
        self.proj = nn.Linear(spec.q_width, h, bias=bias)
        self.norm2 = _norm(spec)
        self.moe = moe  # an MoeMlp in place of fc1 and fc2, or None
        if moe is None:
            self.fc1 = nn.Linear(h, spec.fc1_width, bias=bias)  # SwiGLU: rows [gate | up]
            self.fc2 = nn.Linear(spec.ffn_hidden_size, h, bias=bias)
        self.gqa = spec.num_query_groups != spec.num_attention_heads
        self.sdpa_gqa = self.gqa and _sdpa_takes_enable_gqa()
        # One function object shared by every layer (so torch.compile's guards match across
        # layers); torch_context_parallel.py may swap it for a torch.compiler.disable'd copy.
        self.attention = causal_attention

    def forward(self, x, rope):  # x: (b, s, h) -> (x, MoE aux loss or None)
        sp = self.spec
        b, s, _ = x.shape
        qkv = self.qkv(self.norm1(x))  # (b, s, q + 2 kv)
        q, k, v = qkv.split((sp.q_width, sp.kv_width, sp.kv_width), dim=-1)
        q = q.view(b, s, sp.num_attention_heads, sp.head_dim)
        k = k.view(b, s, sp.num_query_groups, sp.head_dim)
        v = v.view(b, s, sp.num_query_groups, sp.head_dim)
        if rope is not None:
            q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (b, heads, s, d)
        y = self.attention(q, k, v, self.sdpa_gqa)
        y = y.transpose(1, 2).reshape(b, s, sp.q_width)
        x = x + self.proj(y)
        if self.moe is not None:
            m, aux = self.moe(self.norm2(x))
            return x + m, aux
        u = self.fc1(self.norm2(x))  # (b, s, fc1_width)
        return x + self.fc2(_activation(sp, u)), None


class Transformer(_Module):
    """forward(tokens, targets) -> mean cross-entropy (+ the MoE layers' auxiliary losses, summed
    over layers as Megatron adds each layer's); tokens, targets: (b, s) int64."""

    def __init__(self, spec, moe_impl="loop", moe_aux_loss_coeff=MOE_AUX_LOSS_COEFF):
        super().__init__()
        self.spec = spec
        h = spec.hidden_size
        self.wte = nn.Embedding(spec.vocab_size, h)
        self.wpe = None if spec.rope else nn.Embedding(spec.seq_length, h)
        self.layers = nn.ModuleList(
            Block(spec, MoeMlp(spec, moe_impl, moe_aux_loss_coeff) if spec.layer_is_moe(i) else None)
            for i in range(spec.num_layers))
        self.final_norm = _norm(spec)
        self.lm_head = None if spec.tie_embeddings else nn.Linear(h, spec.vocab_size, bias=False)
        # A plain attribute, not a buffer: model.to(bfloat16) must leave the angles in fp32.
        self.rope = rotary_tables(spec, spec.seq_length, self.wte.weight.device) if spec.rope else None

    def forward(self, tokens, targets, positions=None):
        """positions: None for tokens 0..s-1 in order; else (s,) int64, each token's position in
        the whole sequence (a context-parallel rank holds a permuted share of the sequence:
        tools/bench/torch_context_parallel.py), indexing the learned positions or RoPE angles."""
        s = tokens.shape[1]
        x = self.wte(tokens)  # (b, s, h)
        if positions is None:
            if self.wpe is not None:
                x = x + self.wpe.weight[:s]
            rope = None if self.rope is None else (self.rope[0][:s], self.rope[1][:s])
        else:
            if self.wpe is not None:
                x = x + self.wpe(positions)  # (s, h), broadcast over the batch
            rope = None if self.rope is None else (self.rope[0][positions], self.rope[1][positions])
        aux_total = None
        for layer in self.layers:
            x, aux = layer(x, rope)
            if aux is not None:
                aux_total = aux if aux_total is None else aux_total + aux
        x = self.final_norm(x)
        head = self.wte.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(x, head)  # (b, s, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
        return loss if aux_total is None else loss + aux_total


def init_weights(model, spec, std=INIT_STD):
    """Megatron's init_method_normal / scaled_init_method_normal (Shoeybi et al. 2019); the
    router and expert fc1 N(0, std), expert fc2 (it feeds the residual) N(0, std/sqrt(2L))."""
    scaled = std / math.sqrt(2 * spec.num_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                residual_out = name.endswith(("proj.weight", "fc2.weight", "expert_fc2_weight"))
                p.normal_(0.0, scaled if residual_out else std)
            elif "norm" in name and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()


# ----------------------------------------------------------------------------- the benchmark

def _log(message):
    print(message, file=sys.stderr, flush=True)


def _allow_tf32():
    matmul = torch.backends.cuda.matmul
    # PyTorch >= 2.9 has the fp32_precision settings and refuses a mix with the legacy flags.
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32"
    else:
        matmul.allow_tf32 = True


def _is_out_of_memory(error):
    oom_type = getattr(torch.cuda, "OutOfMemoryError", None) if torch is not None else None
    if oom_type is not None and isinstance(error, oom_type):
        return True
    # torch.compile wraps errors raised while it compiles (BackendCompilerFailed, InductorError).
    text = f"{type(error).__name__}: {error}".lower()
    return "out of memory" in text or "outofmemoryerror" in text


def build_model_and_optimizer(spec, device, mode, lr, moe_impl="loop",
                              moe_aux_loss_coeff=MOE_AUX_LOSS_COEFF):
    """(model, params, optimizer): the Transformer on `device`, initialised (init_weights; seed
    the generator first), checked against parameter_count(), cast to bf16 for mode "bf16"; fused
    AdamW as the engine's (weight decay on matrices only). params: decayed then not decayed."""
    with device:  # parameters and rotary tables are created on the GPU directly
        model = Transformer(spec, moe_impl=moe_impl, moe_aux_loss_coeff=moe_aux_loss_coeff)
    init_weights(model, spec)
    built = sum(p.numel() for p in model.parameters())
    expected = parameter_count(spec)
    if built != expected:  # the FLOP formula counts what parameter_count() counts
        raise AssertionError(f"module has {built} parameters, parameter_count() says {expected}")
    if mode == "bf16":
        model = model.to(torch.bfloat16)
    decay = [p for p in model.parameters() if p.dim() >= 2]      # matrices, as the engine
    no_decay = [p for p in model.parameters() if p.dim() < 2]    # biases and norm parameters
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS, fused=True)
    return model, decay + no_decay, optimizer


def run_benchmark(args, spec):
    """Build, train and time; returns the result record (see result_record)."""
    device = torch.device("cuda", args.device)
    torch.cuda.set_device(device)
    _allow_tf32()
    torch.manual_seed(args.seed)
    moe_info = {}
    impl = "loop"
    if spec.is_moe:
        impl = args.moe_impl
        if impl in ("grouped", "auto"):
            problem = grouped_mm_problem(device, torch.bfloat16 if args.mode == "bf16"
                                         else torch.float32, spec)
            if problem is None:
                impl = "grouped"
            else:
                _log(f"note: --moe-impl {args.moe_impl}: {problem}; using the per-expert loop")
                moe_info["moe_impl_fallback"] = problem
                impl = "loop"
        moe_info["moe_impl_used"] = impl
    model, params, optimizer = build_model_and_optimizer(
        spec, device, args.mode, args.lr, moe_impl=impl, moe_aux_loss_coeff=args.moe_aux_loss_coeff)
    compiled = not args.no_compile
    step_fn = model if args.no_compile else torch.compile(model, mode=args.compile_mode)
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if args.mode == "amp"
                else contextlib.nullcontext())
    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed)
    seq = spec.seq_length
    total_bytes = torch.cuda.mem_get_info(device)[1]

    def train_step():
        tokens = torch.randint(0, spec.vocab_size, (args.mbs, seq + 1), device=device,
                               generator=generator)
        inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        with autocast:
            loss = step_fn(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    torch.cuda.reset_peak_memory_stats(device)
    losses, step_seconds = [], []
    peak_device_bytes = 0
    for i in range(args.warmup + args.steps):
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        try:
            loss = train_step()
        except Exception as error:  # noqa: BLE001 -- MoE under torch.compile: retry eager
            if not (i == 0 and compiled and spec.is_moe) or _is_out_of_memory(error):
                raise
            traceback.print_exc(file=sys.stderr)
            _log("note: torch.compile failed on the MoE model; running eager")
            moe_info["compile_error"] = f"{type(error).__name__}: {str(error)[:300]}"
            compiled, step_fn = False, model
            optimizer.zero_grad(set_to_none=True)
            torch._dynamo.reset()
            loss = train_step()
        torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
        losses.append(loss.item())
        peak_device_bytes = max(peak_device_bytes, total_bytes - torch.cuda.mem_get_info(device)[0])
        if i >= args.warmup:
            step_seconds.append(seconds)
        if i < args.warmup or (i - args.warmup + 1) % args.log_interval == 0:
            _log(f"step {i + 1:4d}{' (warm-up)' if i < args.warmup else '          '} "
                 f"loss {losses[-1]:.4f}  {seconds * 1e3:9.1f} ms")

    step_s = statistics.median(step_seconds)
    tokens_per_s = args.mbs * seq / step_s
    return result_record(
        args, spec, step_time_s=step_s, tokens_per_s=tokens_per_s,
        peak_memory_bytes=torch.cuda.max_memory_allocated(device),
        peak_reserved_bytes=torch.cuda.max_memory_reserved(device),
        peak_device_memory_bytes=peak_device_bytes,
        loss_first=losses[0], loss_last=losses[-1], step_times_s=step_seconds,
        compiled=compiled, **moe_info)


def result_record(args, spec, **measured):
    """The JSON object of one run: the settings, the model's counts, then what was measured."""
    record = {
        "framework": "pytorch",
        "mode": args.mode,
        "model": spec.name,
        "mbs": args.mbs,
        "seq": spec.seq_length,
        "compile": not args.no_compile,
        "warmup_steps": args.warmup,
        "timed_steps": args.steps,
        "parameters": parameter_count(spec),
        "flops_per_token": flops_per_token(spec),
        "peak_flops_per_s": args.peak_flops,
    }
    if spec.is_moe:
        record.update({
            "active_parameters": parameter_count(spec, active=True),
            "num_experts": spec.num_experts, "router_topk": spec.router_topk,
            "moe_ffn_hidden_size": spec.moe_ffn_hidden_size, "moe_layers": spec.num_moe_layers,
            "moe_impl": args.moe_impl, "moe_aux_loss_coeff": args.moe_aux_loss_coeff})
    record.update(measured)
    if "tokens_per_s" in measured:
        record["mfu"] = mfu(spec, measured["tokens_per_s"], args.peak_flops)
        record["tflops_per_s"] = flops_per_token(spec) * measured["tokens_per_s"] / 1e12
    if torch is not None:
        record["torch_version"] = torch.__version__
        if torch.cuda.is_available():
            record["gpu"] = torch.cuda.get_device_name(args.device)
    return record


def print_summary(record):
    if "error" in record:
        print(f"{record['model']} ({record['mode']}): {record['error']}")
        return
    if record.get("dry_run"):
        print(f"dry run: {record['description']}")
        if "active_parameters" in record:
            print(f"  MoE: {record['parameters'] / 1e9:.3f} B parameters in all, "
                  f"{record['active_parameters'] / 1e9:.3f} B active per token "
                  f"({record['router_topk']} of {record['num_experts']} experts in "
                  f"{record['moe_layers']} layers), --moe-impl {record['moe_impl']}, "
                  f"aux loss coeff {record['moe_aux_loss_coeff']:g}")
        print(f"  {record['parameters'] / 1e9:.3f} B parameters, "
              f"{record['flops_per_token'] / 1e9:.3f} GFLOP per token; would train "
              f"{record['warmup_steps']} warm-up + {record['timed_steps']} timed steps of "
              f"mbs {record['mbs']} x seq {record['seq']}, mode {record['mode']}, "
              f"compile {record['compile']}")
        return
    moe = (f", MoE {record.get('moe_impl_used', '?')}" if "active_parameters" in record else "")
    print(f"{record['model']} ({record['mode']}, compile {record.get('compiled', record['compile'])}"
          f"{moe}) on "
          f"{record.get('gpu', '?')}, torch {record.get('torch_version', '?')}")
    print(f"  median of {record['timed_steps']} steps: {record['step_time_s'] * 1e3:.1f} ms/step, "
          f"{record['tokens_per_s']:,.0f} tokens/s, {record['tflops_per_s']:.1f} TFLOP/s, "
          f"MFU {100 * record['mfu']:.1f} %")
    print(f"  peak memory: allocated {record['peak_memory_bytes'] / GIB:.2f} GiB, reserved "
          f"{record['peak_reserved_bytes'] / GIB:.2f} GiB, device in use "
          f"{record['peak_device_memory_bytes'] / GIB:.2f} GiB")
    print(f"  loss {record['loss_first']:.4f} -> {record['loss_last']:.4f}")


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Train a sextant model preset with PyTorch and report its speed "
                    "(the reference for tools/bench/engine_vs_pytorch.py).")
    p.add_argument("--model", required=True,
                   help="preset name (configs/models/NAME.yaml) or a model YAML path")
    p.add_argument("--mbs", type=int, default=4, help="micro-batch in sequences (default 4)")
    p.add_argument("--steps", type=int, default=30, help="timed steps (default 30)")
    p.add_argument("--warmup", type=int, default=10,
                   help="untimed steps first, compilation included (default 10)")
    p.add_argument("--mode", required=True, choices=("amp", "bf16"),
                   help="amp: fp32 weights + autocast bf16; bf16: bf16 weights and optimizer")
    p.add_argument("--seq-length", type=int, help="sequence length (default: the model's)")
    p.add_argument("--no-compile", action="store_true", help="eager mode, no torch.compile")
    p.add_argument("--compile-mode", default=None,
                   help="torch.compile mode (default: its default; e.g. max-autotune-no-cudagraphs)")
    p.add_argument("--peak-flops", type=float, default=H100_SXM_PEAK_BF16_FLOPS_PER_S,
                   help="peak FLOP/s MFU divides by (default 989.4e12: H100 SXM bf16 dense)")
    p.add_argument("--lr", type=float, default=LR, help="AdamW learning rate, constant (default 3e-4)")
    p.add_argument("--seed", type=int, default=1234, help="seed of the weights and tokens")
    p.add_argument("--device", type=int, default=0, help="CUDA device index")
    p.add_argument("--log-interval", type=int, default=10, help="progress line every N timed steps")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--moe-impl", choices=MOE_IMPLS, default="auto",
                   help="MoE experts: grouped = torch._grouped_mm, loop = one matmul per expert "
                        "(a host sync), auto = grouped when it works here, else loop (default)")
    p.add_argument("--moe-aux-loss-coeff", type=float, default=MOE_AUX_LOSS_COEFF,
                   help="the Switch load-balancing loss's alpha (default 1e-2, as the engine)")
    p.add_argument("--dry-run", action="store_true",
                   help="check the model file and print what would run; needs no torch or GPU")
    args = p.parse_args(argv)
    for name in ("mbs", "steps", "log_interval"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    if args.warmup < 0:
        p.error(f"--warmup {args.warmup}: must be at least 0")
    if args.seq_length is not None and args.seq_length < 1:
        p.error(f"--seq-length {args.seq_length}: must be at least 1")
    if args.peak_flops <= 0:
        p.error(f"--peak-flops {args.peak_flops}: must be positive")
    if args.moe_aux_loss_coeff < 0:
        p.error(f"--moe-aux-loss-coeff {args.moe_aux_loss_coeff}: must be at least 0")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        spec = load_model_spec(args.model, seq_length=args.seq_length,
                               warn=lambda m: _log(f"note: {m}"))
    except ConfigError as e:
        for problem in e.problems:
            _log(f"torch_reference: error: {problem}")
        return 2

    def emit(record):
        if args.json:
            print(json.dumps(record), flush=True)
        else:
            print_summary(record)

    if args.dry_run:
        emit(result_record(args, spec, dry_run=True, description=spec.describe()))
        return 0
    if torch is None:
        emit(result_record(args, spec, error="PyTorch is not installed (import torch failed)"))
        return 1
    if not torch.cuda.is_available():
        emit(result_record(args, spec, error="no CUDA GPU is visible to PyTorch"))
        return 1
    _log(f"{spec.describe()}; {parameter_count(spec) / 1e9:.3f} B parameters; mode {args.mode}, "
         f"mbs {args.mbs}, compile {not args.no_compile}; torch {torch.__version__} on "
         f"{torch.cuda.get_device_name(args.device)}")
    try:
        record = run_benchmark(args, spec)
    except Exception as e:  # noqa: BLE001 -- the driver needs a JSON line whatever happened
        traceback.print_exc(file=sys.stderr)
        if _is_out_of_memory(e):
            emit(result_record(args, spec, error="out of memory",
                               detail=f"{type(e).__name__}: {str(e)[:500]}"))
            return 0
        emit(result_record(args, spec, error=f"{type(e).__name__}: {str(e)[:500]}"))
        return 1
    emit(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
