#!/usr/bin/env python3
"""Train the model of a sextant preset with PyTorch's own context parallelism on N GPUs: the
yardstick of the engine's cp speed (issue 26).

The model, its initialisation, AdamW, --mode amp/bf16, the FLOP count and the presets are
torch_reference.py's (imported, not copied). What this adds:

Layout   torchrun starts world = N processes, one GPU each. A DeviceMesh (dp, cp), dims named
         ("dp", "cp"), dp = world / --cp; rank = dp_rank * cp + cp_rank, so a cp group is cp
         consecutive ranks (on one node: NVLink), as Megatron orders cp inside dp.
Data     each micro-batch random tokens (mbs, seq + 1) drawn on the GPU from a generator seeded
         with --seed + dp_rank: the cp ranks of one dp rank draw the same sequences, the dp ranks
         different ones. inputs = tokens[:, :-1], targets = tokens[:, 1:], positions =
         arange(seq) (the index into the learned positions or the RoPE angles). A step is
         gbs / (dp mbs) micro-batches (--gbs, default dp x mbs: one), their gradients
         accumulated (DDP's no_sync but for the last), then one AdamW step.
Context  with cp > 1 each micro-batch runs forward and backward inside
parallel   torch.distributed.tensor.experimental.context_parallel(cp_mesh,
               buffers=[inputs, targets, positions], buffer_seq_dims=[1, 1, 0],
               no_restore_buffers={inputs, targets, positions})
         which (1) shards the three buffers in place along the sequence with the head-tail load
         balancer: the sequence cut into 2 cp chunks, cp rank r keeps chunks r and 2cp-1-r (the
         same split as the engine's ContextParallelChunks), and (2) replaces
         F.scaled_dot_product_attention by ring attention over the cp group for causal SDPA.
         set_rotate_method(--rotate): "allgather" (default: K and V all-gathered once per
         attention, Llama 3's pass-KV, Dubey et al. 2024 sec. 3.3.2) or "alltoall" (K/V passed
         round the ring, each exchange overlapped with the next block's attention). In both the
         backward passes dK/dV round the ring (PyTorch's implementation).
         SDPA backend: torch.nn.attention.sdpa_kernel(--sdpa-backend, default flash) around
         forward and backward, for cp = 1 too. cp = 1 runs plain SDPA, no context-parallel context.
GQA      (num_query_groups < heads) --gqa native: SDPA's enable_gqa (flash takes fewer K/V
         heads; the ring then moves the groups' K/V only); repeat: K/V heads repeated to the
         query heads before SDPA (as torchtitan's Llama does; the ring moves heads/groups times
         more); auto (default): native when the check below passes with it, else repeat.
Check    before training (cp > 1), on the cp mesh: causal SDPA of random bf16 q, k, v with the
         model's heads, groups and head dim over 2 cp x 128 tokens, output and dq, dk, dv, by
         context parallelism (sharded inputs) against plain SDPA of the whole sequence on each
         rank (its result sharded the same way); relative error ||cp - whole|| / ||whole|| of
         each, the largest over all ranks, must stay below 3e-2 (bf16 rounding of the per-block
         outputs and gradients gives a few 1e-3, unit roundoff 2^-9; a wrong mask or chunk
         order gives O(0.1-1)).
         "cp_attention_check" in the JSON holds the errors.
Loss     each rank's loss is the mean cross-entropy over its mbs x seq/cp tokens (divided by the
         micro-batches per step before the backward). Every rank holds the same number of tokens
         (2 chunks of seq/(2cp)), so the mean of the dp*cp local means is the mean over all
         tokens of the global batch; DDP averages the gradients over
         all dp*cp ranks (the default process group), so each rank's gradient is the gradient
         of that global mean, as Megatron's gradient all-reduce over dp x cp. The ring backward
         brings home, to the rank that holds them, the gradients of K/V used by other ranks'
         queries, so the sum over ranks of the local parameter gradients is complete.
Gradients DistributedDataParallel (not FSDP2): the engine replicates the weights over dp x cp
         (ZeRO-1 optional), so DDP's all-reduce of the gradients, bucketed and overlapped with
         the backward, is the like-for-like choice, and it keeps the optimizer step identical to
         torch_reference.py's. With world = 1 there is no DDP.
Compile  unless --no-compile, tried in order, each falling back to the next when a warm-up step
         raises (the reason is kept in "compile_errors"):
           full             torch.compile of the (DDP-wrapped) model, ring attention traced into
                            the graph (DDPOptimizer splits it at the gradient buckets)
           attention-eager  the same, with the attention call under torch.compiler.disable:
                            everything but the ring attention compiled
           eager            no compilation
         After the first step of a compiled variant torch._dynamo.config.error_on_recompile is
         set and dynamo's count of compiled graphs must not grow, so a variant that would
         recompile every step (e.g. on the SDPA that context_parallel() patches anew at each
         entry) fails in warm-up and the next is tried; a recompile in a timed step is an error.
         --warmup must be >= 2 for that check.
--recompute full  torch.utils.checkpoint around each transformer layer (non-reentrant): the
         layer's forward is recomputed in the backward, ring attention included.

Timing and counts: --warmup untimed steps, then --steps timed steps, each bracketed by
torch.cuda.synchronize() and time.perf_counter() on every rank; a step's time is the largest
over the ranks, step_time_s the median of those.
  tokens_per_s          gbs * seq / step_time_s (the whole job, as `sextant run` counts it)
  tokens_per_s_per_gpu  tokens_per_s / world
  mfu                   flops_per_token * tokens_per_s_per_gpu / --peak-flops, flops_per_token =
                        6 P + 12 L (heads * head_dim) seq with seq the WHOLE sequence
                        (torch_reference.flops_per_token; Narayanan et al. 2021, eq. 3)
  peak memory           per rank: torch.cuda.max_memory_allocated / max_memory_reserved, and the
                        device memory in use (cudaMemGetInfo total - free, as `sextant run`
                        reports it) sampled after every step; the JSON has the largest over the
                        ranks and every rank's in "per_rank_memory"
  loss_first/last       the global mean loss of the first and last step

Usage (on the GPU machine; PyTorch in /opt/torch/.venv):
  /opt/torch/.venv/bin/torchrun --nproc-per-node 4 tools/bench/torch_context_parallel.py \\
      --model llama3.2-1b --seq-length 32768 --cp 4 --mbs 1 --steps 20 --json
  /opt/torch/.venv/bin/torchrun --nproc-per-node 4 tools/bench/torch_context_parallel.py \\
      --model gpt-1.3b --seq-length 32768 --cp 2 --mbs 1 --rotate alltoall --mode amp --json
      # dp 2 x cp 2
  /opt/torch/.venv/bin/python tools/bench/torch_context_parallel.py --model llama3.2-1b \\
      --seq-length 32768 --cp 1 --json          # one GPU, no torchrun: the cp = 1 baseline
  python3 tools/bench/torch_context_parallel.py --model llama3.2-1b --seq-length 131072 \\
      --cp 4 --dry-run                          # no torch: shapes, tokens per rank, FLOPs
Add --time-limit-s S inside a device call of fixed length: past S seconds every rank prints an
error JSON line naming the phase it was in and exits (a hung collective then still reports).

Output: with --json the last line of stdout is one JSON object (rank 0 prints it; progress goes
to stderr). A failure prints a JSON line with "error" (and "rank") from each rank that failed,
out of GPU memory as "error": "out of memory", and exits 1: under torchrun a rank that fails
must exit non-zero so that torchrun stops the others. Bad arguments or model file: exit 2.
"""

import argparse
import contextlib
import datetime
import gc
import importlib
import json
import os
import statistics
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import torch_reference as ref  # noqa: E402  -- the model, optimizer, presets and FLOP count

torch, F = ref.torch, ref.F
if torch is not None:
    import torch._dynamo  # noqa: F401  -- its config and counters
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.checkpoint import checkpoint

ROTATE_METHODS = ("allgather", "alltoall")
SDPA_BACKENDS = ("flash", "cudnn", "efficient")
GQA_MODES = ("auto", "native", "repeat")
RECOMPUTE_MODES = ("none", "full")
COMPILE_VARIANTS = ("full", "attention-eager", "eager")
# The attention check: 2 cp chunks of this many tokens; the largest relative error accepted.
CHECK_CHUNK_TOKENS = 128
CHECK_MAX_RELATIVE_ERROR = 3e-2
# Where set_rotate_method lives: the tutorial's module first, then the package it moved to.
CP_MODULES = ("torch.distributed.tensor.experimental._attention",
              "torch.distributed.tensor.experimental._context_parallel")
GIB = ref.GIB


class CheckFailed(Exception):
    """The context-parallel attention disagreed with SDPA over the whole sequence."""


class RecompiledError(Exception):
    """A compiled variant compiled new graphs after its first step."""


# ----------------------------------------------------------------------------- layout and output

class Layout:
    """This process's place: world = dp * cp, rank = dp_rank * cp + cp_rank."""

    def __init__(self, world, rank, local_rank, cp):
        self.world, self.rank, self.local_rank, self.cp = world, rank, local_rank, cp
        self.dp = world // cp
        self.dp_rank, self.cp_rank = rank // cp, rank % cp


def _emit(line):
    """One write of one line, so lines of several ranks sharing torchrun's stdout don't mix."""
    sys.stdout.flush()
    data = (line + "\n").encode()
    while data:
        data = data[os.write(1, data):]


def cp_record(args, spec, layout, **measured):
    """torch_reference's record (settings, counts, versions) plus the layout and `measured`;
    throughput, MFU and TFLOP/s per GPU computed here when tokens_per_s is measured."""
    record = ref.result_record(args, spec)
    record.update({
        "parallelism": "context_parallel",
        "cp": layout.cp, "dp": layout.dp, "world_size": layout.world,
        "seq_per_rank": spec.seq_length // layout.cp,
        "rotate_method": args.rotate if layout.cp > 1 else None,
        "load_balance": "head-tail (chunks r and 2cp-1-r)" if layout.cp > 1 else None,
        "sdpa_backend": args.sdpa_backend,
        "recompute": args.recompute,
        "data_parallel": "ddp" if layout.world > 1 else None,
        "gbs": args.gbs,
    })
    record.update(measured)
    if "tokens_per_s" in measured:
        per_gpu = measured["tokens_per_s"] / layout.world
        record["tokens_per_s_per_gpu"] = per_gpu
        record["mfu"] = ref.mfu(spec, per_gpu, args.peak_flops)
        record["tflops_per_s_per_gpu"] = ref.flops_per_token(spec) * per_gpu / 1e12
    if torch is not None and torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
        with contextlib.suppress(Exception):
            record["nccl_version"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    return record


def print_summary(record):
    if "error" in record:
        print(f"{record['model']} cp {record['cp']} dp {record['dp']} (rank "
              f"{record.get('rank', '?')}): {record['error']}")
        return
    if record.get("dry_run"):
        print(f"dry run: {record['description']}")
        print(f"  world {record['world_size']} = dp {record['dp']} x cp {record['cp']}; "
              f"{record['seq_per_rank']} of {record['seq']} tokens per rank, mbs {record['mbs']}, gbs {record['gbs']}; "
              f"{record['parameters'] / 1e9:.3f} B parameters, "
              f"{record['flops_per_token'] / 1e9:.3f} GFLOP per token; rotate "
              f"{record['rotate_method']}, sdpa {record['sdpa_backend']}, mode {record['mode']}")
        return
    print(f"{record['model']} ({record['mode']}, compile {record.get('compile_variant')}) "
          f"dp {record['dp']} x cp {record['cp']} on {record.get('gpu', '?')}, "
          f"torch {record.get('torch_version', '?')}; rotate {record['rotate_method']}")
    print(f"  median of {record['timed_steps']} steps: {record['step_time_s'] * 1e3:.1f} ms/step, "
          f"{record['tokens_per_s']:,.0f} tokens/s ({record['tokens_per_s_per_gpu']:,.0f} per GPU), "
          f"MFU {100 * record['mfu']:.1f} %")
    print(f"  peak memory (largest rank): allocated {record['peak_memory_bytes'] / GIB:.2f} GiB, "
          f"reserved {record['peak_reserved_bytes'] / GIB:.2f} GiB, device in use "
          f"{record['peak_device_memory_bytes'] / GIB:.2f} GiB")
    print(f"  loss {record['loss_first']:.4f} -> {record['loss_last']:.4f}")


class Watchdog:
    """After limit_s seconds: an error JSON line naming the phase, then exit 1 (0 = never)."""

    def __init__(self, limit_s, describe):
        self.phase = "start"
        self._describe = describe
        self._timer = None
        if limit_s > 0:
            self._timer = threading.Timer(limit_s, self._fire, args=(limit_s,))
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, limit_s):
        try:
            _emit(json.dumps(self._describe(
                error=f"time limit of {limit_s:g} s reached in phase '{self.phase}' (a hung "
                      f"collective or a slow compile)")))
        finally:
            os._exit(1)

    def cancel(self):
        if self._timer is not None:
            self._timer.cancel()


# ----------------------------------------------------------------------------- PyTorch CP API

def context_parallel_api():
    """(context_parallel, set_rotate_method) from one module, so they share its options."""
    problems = []
    for name in CP_MODULES:
        try:
            module = importlib.import_module(name)
            return module.context_parallel, module.set_rotate_method
        except (ImportError, AttributeError) as error:
            problems.append(f"{name}: {type(error).__name__}: {error}")
    raise ImportError("PyTorch's context parallelism was not found (PyTorch >= 2.7 needed): "
                      + "; ".join(problems))


def sdpa_backend_context(name):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[name]
    return lambda: sdpa_kernel([backend])


def check_cp_attention(cp_mesh, context_parallel, spec, device, enable_gqa, attention_context,
                       autocast, seed):
    """{"out", "dq", "dk", "dv": relative error} of causal SDPA under context_parallel() against
    SDPA of the whole sequence, the largest over all ranks (an all-reduce: every rank gets the
    same numbers). q (1, heads, s, d), k and v (1, groups, s, d) bf16 N(0, 1), s = 2 cp x 128,
    the same on every rank; the reference output and gradients are sharded by the same
    context_parallel() call as the inputs, so each rank compares its own share."""
    s = 2 * cp_mesh.size() * CHECK_CHUNK_TOKENS
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)

    def draw(heads):
        return torch.randn(1, heads, s, spec.head_dim, device=device,
                           generator=generator).to(torch.bfloat16)

    q, k, v = draw(spec.num_attention_heads), draw(spec.num_query_groups), draw(spec.num_query_groups)
    grad_out = draw(spec.num_attention_heads)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    with attention_context(), autocast():
        whole = ref.causal_attention(*leaves, enable_gqa)
    whole.backward(grad_out)
    expected = [whole.detach().clone()] + [t.grad.clone() for t in leaves]
    local = [q, k, v, grad_out]
    buffers = local + expected
    with context_parallel(cp_mesh, buffers=buffers, buffer_seq_dims=[2] * len(buffers),
                          no_restore_buffers=set(buffers)), attention_context():
        for t in local[:3]:
            t.requires_grad_()  # after the in-place sharding, which needs tensors without grad
        with autocast():
            out = ref.causal_attention(local[0], local[1], local[2], enable_gqa)
        out.backward(local[3])
    got = [out.detach(), local[0].grad, local[1].grad, local[2].grad]
    errors = torch.stack([(g.float() - e.float()).norm() / e.float().norm().clamp_min(1e-30)
                          for g, e in zip(got, expected)])
    dist.all_reduce(errors, op=dist.ReduceOp.MAX)
    return dict(zip(("out", "dq", "dk", "dv"), errors.tolist()))


class SdpaRestorer:
    """context_parallel() replaces F.scaled_dot_product_attention on entry and puts it back on a
    normal exit only; after an exception inside its context, restore() puts it back."""

    def __init__(self):
        self.original = F.scaled_dot_product_attention

    def restore(self):
        if F.scaled_dot_product_attention is not self.original:
            F.scaled_dot_product_attention = self.original


def choose_gqa(args, spec, cp_mesh, context_parallel, device, attention_context, autocast,
               watchdog, sdpa):
    """(enable_gqa, check record): the GQA form that passes the attention check (--gqa)."""
    grouped = spec.num_query_groups != spec.num_attention_heads
    native_possible = grouped and ref._sdpa_takes_enable_gqa()
    if grouped and args.gqa == "native" and not native_possible:
        raise CheckFailed(f"--gqa native: torch {torch.__version__} has no enable_gqa "
                          f"(PyTorch >= 2.5 needed)")
    if not grouped:
        candidates = [False]
    elif args.gqa == "auto":
        candidates = [True, False] if native_possible else [False]
    else:
        candidates = [args.gqa == "native"]
    tried = []
    for enable_gqa in candidates:
        name = "native" if enable_gqa else ("repeat" if grouped else "none")
        watchdog.phase = f"attention check (gqa {name})"
        try:
            errors = check_cp_attention(cp_mesh, context_parallel, spec, device, enable_gqa,
                                        attention_context, autocast, args.seed)
        except Exception as error:  # noqa: BLE001 -- an unsupported form: try the next one
            sdpa.restore()
            if ref._is_out_of_memory(error):
                raise
            traceback.print_exc(file=sys.stderr)
            tried.append({"gqa": name, "error": f"{type(error).__name__}: {str(error)[:300]}"})
            continue
        worst = max(errors.values())
        tried.append({"gqa": name, "relative_errors": errors})
        if worst < CHECK_MAX_RELATIVE_ERROR:
            return enable_gqa, {"passed": True, "gqa": name, "relative_errors": errors,
                                "tokens": 2 * cp_mesh.size() * CHECK_CHUNK_TOKENS,
                                "max_relative_error": CHECK_MAX_RELATIVE_ERROR, "tried": tried}
        ref._log(f"note: context-parallel attention (gqa {name}) off by {errors} (relative)")
    raise CheckFailed(f"context-parallel SDPA disagrees with SDPA over the whole sequence "
                      f"(limit {CHECK_MAX_RELATIVE_ERROR:g} relative): {json.dumps(tried)}")


# ----------------------------------------------------------------------------- training

class CheckpointedLayer(ref._Module):
    """A transformer layer whose forward is recomputed in the backward (--recompute full)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, rope):
        return checkpoint(self.layer, x, rope, use_reentrant=False)


def _set_error_on_recompile(value):
    config = torch._dynamo.config
    if hasattr(config, "error_on_recompile"):
        config.error_on_recompile = value


def _allow_one_compile_per_layer(num_layers):
    """Raise dynamo's per-function recompile limit (default 8) above the layer count: should
    a layer's frame be compiled once per layer (a graph break at its attention, guards that
    tell the layers apart), every layer is still compiled rather than the 9th on left eager."""
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):  # the name before PyTorch 2.7: cache_
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), 2 * num_layers + 8))
            return


def _compiled_graph_count():
    """Graphs torch._dynamo has compiled so far (its "unique_graphs" counter; 0 if absent)."""
    with contextlib.suppress(Exception):
        return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    return 0


def _dynamo_stats():
    """torch._dynamo's counters of compiled frames and graphs ({} where they are not found)."""
    with contextlib.suppress(Exception):
        counters = torch._dynamo.utils.counters
        return {group: {str(k): int(v) for k, v in counters[group].items()}
                for group in ("stats", "frames") if group in counters}
    return {}


def run(args, spec, layout, watchdog):
    """Build, check, train and time on this rank; the record (on every rank; rank 0 prints)."""
    device = torch.device("cuda", layout.local_rank)
    torch.cuda.set_device(device)
    ref._allow_tf32()
    watchdog.phase = "process group"
    timeout = datetime.timedelta(seconds=args.nccl_timeout_s)
    try:
        dist.init_process_group("nccl", timeout=timeout, device_id=device)
    except TypeError:  # PyTorch < 2.3 has no device_id
        dist.init_process_group("nccl", timeout=timeout)
    mesh = init_device_mesh("cuda", (layout.dp, layout.cp), mesh_dim_names=("dp", "cp"))
    cp_mesh = mesh["cp"]
    if (mesh.get_local_rank("dp"), mesh.get_local_rank("cp")) != (layout.dp_rank, layout.cp_rank):
        raise AssertionError(f"mesh coordinates {mesh.get_coordinate()} differ from the layout's "
                             f"(dp {layout.dp_rank}, cp {layout.cp_rank})")

    attention_context = sdpa_backend_context(args.sdpa_backend)

    def autocast():
        return (torch.autocast("cuda", dtype=torch.bfloat16) if args.mode == "amp"
                else contextlib.nullcontext())

    measured = {}
    context_parallel = None
    sdpa = SdpaRestorer()
    enable_gqa = spec.num_query_groups != spec.num_attention_heads and ref._sdpa_takes_enable_gqa()
    if layout.cp > 1:
        context_parallel, set_rotate_method = context_parallel_api()
        set_rotate_method(args.rotate)
        enable_gqa, measured["cp_attention_check"] = choose_gqa(
            args, spec, cp_mesh, context_parallel, device, attention_context, autocast, watchdog,
            sdpa)
    elif args.gqa != "auto" and spec.num_query_groups != spec.num_attention_heads:
        enable_gqa = args.gqa == "native"
    measured["gqa"] = (("native" if enable_gqa else "repeat")
                       if spec.num_query_groups != spec.num_attention_heads else None)

    watchdog.phase = "model"
    torch.manual_seed(args.seed)  # the same weights on every rank (DDP broadcasts rank 0's too)
    model, params, optimizer = ref.build_model_and_optimizer(spec, device, args.mode, args.lr)
    for layer in model.layers:
        layer.sdpa_gqa = enable_gqa
    if args.recompute == "full":
        model.layers = ref.nn.ModuleList(CheckpointedLayer(layer) for layer in model.layers)
    blocks = [getattr(layer, "layer", layer) for layer in model.layers]
    eager_attention = torch.compiler.disable(ref.causal_attention)  # one object for all layers

    ddp = []  # the live DistributedDataParallel wrapper, if any

    def wrap(variant):
        """The callable one step runs for this compile variant. A fresh DDP wrapper each time
        (the last one's gradient hooks removed first), so a variant that failed in the middle of
        a backward leaves no half-finished reduction behind."""
        while ddp:
            old = ddp.pop()
            if hasattr(old, "_remove_autograd_hooks"):
                old._remove_autograd_hooks()
            del old
        gc.collect()
        for block in blocks:
            block.attention = eager_attention if variant == "attention-eager" else ref.causal_attention
        module = model
        if layout.world > 1:
            module = DistributedDataParallel(model, device_ids=[layout.local_rank],
                                             broadcast_buffers=False)
            ddp.append(module)
        if variant == "eager":
            return module
        return torch.compile(module, mode=args.compile_mode)

    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed + layout.dp_rank)
    seq = spec.seq_length
    total_bytes = torch.cuda.mem_get_info(device)[1]

    accumulation = args.gbs // (layout.dp * args.mbs)

    def micro_step(step_fn):
        tokens = torch.randint(0, spec.vocab_size, (args.mbs, seq + 1), device=device,
                               generator=generator)
        inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        if layout.cp > 1:
            positions = torch.arange(seq, device=device)
            buffers = [inputs, targets, positions]  # (mbs, seq), (mbs, seq), (seq)
            sharding = context_parallel(cp_mesh, buffers=buffers, buffer_seq_dims=[1, 1, 0],
                                        no_restore_buffers=set(buffers))
        else:
            positions, sharding = None, contextlib.nullcontext()
        with sharding, attention_context():
            with autocast():
                loss = step_fn(inputs, targets, positions)  # mean over this rank's tokens
            (loss / accumulation).backward()
        return loss.detach()

    def train_step(step_fn):
        """gbs / (dp mbs) micro-batches, the gradients all-reduced after the last one only."""
        total = 0.0
        for micro in range(accumulation):
            last = micro == accumulation - 1
            with ddp[0].no_sync() if ddp and not last else contextlib.nullcontext():
                total = total + micro_step(step_fn)
        torch.nn.utils.clip_grad_norm_(params, ref.GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return total / accumulation

    variants = ["eager"] if args.no_compile else list(COMPILE_VARIANTS)
    compile_errors = []
    if not args.no_compile:
        _allow_one_compile_per_layer(spec.num_layers)
    step_fn = wrap(variants[0])
    torch.cuda.reset_peak_memory_stats(device)
    losses, step_seconds, peak_device_bytes = [], [], 0
    i, graphs_after_first_step = 0, 0
    while i < args.warmup + args.steps:
        watchdog.phase = (f"step {i + 1} ({'warm-up' if i < args.warmup else 'timed'}, "
                          f"{variants[0]})")
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        try:
            loss = train_step(step_fn)
            torch.cuda.synchronize(device)
            if variants[0] != "eager":
                graphs = _compiled_graph_count()
                if i == 0:
                    graphs_after_first_step = graphs
                    _set_error_on_recompile(True)  # from now on a recompile is an error
                elif graphs > graphs_after_first_step:
                    raise RecompiledError(f"torch.compile compiled {graphs - graphs_after_first_step}"
                                          f" more graph(s) in step {i + 1}: it would recompile "
                                          f"every step")
        except Exception as error:  # noqa: BLE001 -- a compile variant that fails: the next one
            if ref._is_out_of_memory(error) or (i >= args.warmup and i > 0) or len(variants) == 1:
                raise
            traceback.print_exc(file=sys.stderr)
            failure = f"{type(error).__name__}: {str(error)[:400]}"
        else:
            failure = None
        if failure is not None:  # out of the except block: its traceback no longer holds DDP
            compile_errors.append({"variant": variants[0], "step": i + 1, "error": failure})
            ref._log(f"note: compile variant '{variants[0]}' failed in step {i + 1}; "
                     f"trying '{variants[1]}'")
            variants.pop(0)
            sdpa.restore()
            _set_error_on_recompile(False)
            step_fn = None
            torch._dynamo.reset()
            optimizer.zero_grad(set_to_none=True)
            step_fn = wrap(variants[0])
            torch.cuda.empty_cache()
            losses, step_seconds, peak_device_bytes, i = [], [], 0, 0
            torch.cuda.reset_peak_memory_stats(device)
            continue
        seconds = time.perf_counter() - start
        losses.append(loss)
        peak_device_bytes = max(peak_device_bytes, total_bytes - torch.cuda.mem_get_info(device)[0])
        if i >= args.warmup:
            step_seconds.append(seconds)
        if layout.rank == 0 and (i < args.warmup or (i - args.warmup + 1) % args.log_interval == 0):
            ref._log(f"step {i + 1:4d}{' (warm-up)' if i < args.warmup else '          '} "
                     f"local loss {loss.item():.4f}  {seconds * 1e3:9.1f} ms")
        i += 1

    watchdog.phase = "gathering results"
    world = layout.world
    # Each timed step's time is the slowest rank's; the loss the mean of the ranks' local means.
    step_max = torch.tensor(step_seconds, dtype=torch.float64, device=device)
    dist.all_reduce(step_max, op=dist.ReduceOp.MAX)
    loss_mean = torch.stack(losses).float()
    dist.all_reduce(loss_mean, op=dist.ReduceOp.SUM)
    loss_mean /= world
    memory = torch.tensor([torch.cuda.max_memory_allocated(device),
                           torch.cuda.max_memory_reserved(device), peak_device_bytes],
                          dtype=torch.float64, device=device)
    memory_all = torch.empty(world, 3, dtype=torch.float64, device=device)
    dist.all_gather_into_tensor(memory_all, memory)
    per_rank = [{"rank": r, "peak_memory_bytes": int(m[0]), "peak_reserved_bytes": int(m[1]),
                 "peak_device_memory_bytes": int(m[2])} for r, m in enumerate(memory_all.tolist())]
    step_times = step_max.tolist()
    step_s = statistics.median(step_times)
    variant = variants[0]
    measured.update(
        step_time_s=step_s, step_times_s=step_times,
        tokens_per_s=args.gbs * seq / step_s, grad_accumulation=accumulation,
        peak_memory_bytes=max(m["peak_memory_bytes"] for m in per_rank),
        peak_reserved_bytes=max(m["peak_reserved_bytes"] for m in per_rank),
        peak_device_memory_bytes=max(m["peak_device_memory_bytes"] for m in per_rank),
        per_rank_memory=per_rank,
        loss_first=loss_mean[0].item(), loss_last=loss_mean[-1].item(),
        compiled=variant != "eager", compile_variant=variant, compile_errors=compile_errors,
        dynamo_counters=_dynamo_stats() if variant != "eager" else {})
    return measured


# ----------------------------------------------------------------------------- command line

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Train a sextant model preset with PyTorch's context parallelism under "
                    "torchrun and report its speed (the yardstick of the engine's cp).")
    p.add_argument("--model", required=True,
                   help="preset name (configs/models/NAME.yaml) or a model YAML path")
    p.add_argument("--cp", type=int, default=1,
                   help="context-parallel size; it must divide the number of processes, "
                        "dp = processes / cp (default 1)")
    p.add_argument("--seq-length", type=int,
                   help="the whole sequence (default: the model's); a multiple of 2 cp")
    p.add_argument("--mbs", type=int, default=1,
                   help="sequences per dp rank and micro-batch (default 1)")
    p.add_argument("--gbs", type=int,
                   help="sequences per step over all dp ranks, a multiple of dp x mbs: "
                        "gbs / (dp mbs) micro-batches accumulated per optimizer step, as the "
                        "engine's --layout gbs (default dp x mbs: one)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed steps first, compilation included (default 5; >= 2 to check "
                        "for recompilation before timing)")
    p.add_argument("--mode", choices=("amp", "bf16"), default="bf16",
                   help="amp: fp32 weights + autocast bf16; bf16: bf16 weights and optimizer "
                        "(default bf16)")
    p.add_argument("--rotate", choices=ROTATE_METHODS, default="allgather",
                   help="set_rotate_method: allgather (default) or alltoall")
    p.add_argument("--sdpa-backend", choices=SDPA_BACKENDS, default="flash",
                   help="the SDPA kernel (torch.nn.attention.sdpa_kernel; default flash)")
    p.add_argument("--gqa", choices=GQA_MODES, default="auto",
                   help="grouped-query attention under cp: native (SDPA's enable_gqa), repeat "
                        "(K/V heads repeated), auto: native if the attention check passes")
    p.add_argument("--recompute", choices=RECOMPUTE_MODES, default="none",
                   help="full: recompute each layer's forward in the backward (default none)")
    p.add_argument("--no-compile", action="store_true", help="eager mode, no torch.compile")
    p.add_argument("--compile-mode", default=None, help="torch.compile mode (default: its default)")
    p.add_argument("--peak-flops", type=float, default=ref.H100_SXM_PEAK_BF16_FLOPS_PER_S,
                   help="peak FLOP/s per GPU MFU divides by (default 989.4e12: H100 SXM bf16)")
    p.add_argument("--lr", type=float, default=ref.LR, help="AdamW learning rate (default 3e-4)")
    p.add_argument("--seed", type=int, default=1234,
                   help="seed of the weights; the tokens of dp rank i use seed + i")
    p.add_argument("--nccl-timeout-s", type=float, default=300,
                   help="process-group timeout: a collective waiting longer aborts (default 300)")
    p.add_argument("--time-limit-s", type=float, default=0,
                   help="past this many seconds print an error JSON line and exit (0 = none)")
    p.add_argument("--log-interval", type=int, default=10, help="progress line every N timed steps")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--dry-run", action="store_true",
                   help="check the arguments and model file, print what would run; no torch needed")
    args = p.parse_args(argv)
    for name in ("cp", "mbs", "steps", "log_interval"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    if args.warmup < 0:
        p.error(f"--warmup {args.warmup}: must be at least 0")
    if args.seq_length is not None and args.seq_length < 1:
        p.error(f"--seq-length {args.seq_length}: must be at least 1")
    for name in ("peak_flops", "nccl_timeout_s"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be positive")
    if args.time_limit_s < 0:
        p.error(f"--time-limit-s {args.time_limit_s}: must be at least 0")
    # torch_reference.result_record reads these; the CP benchmark has no MoE and one GPU a rank.
    args.moe_impl, args.moe_aux_loss_coeff = "loop", ref.MOE_AUX_LOSS_COEFF
    return args


def _environment_layout(cp, dry_run):
    """The Layout from torchrun's RANK, WORLD_SIZE, LOCAL_RANK; without torchrun one process
    (a dry run assumes world = cp). Sets the rendezvous variables a lone process lacks."""
    if "RANK" not in os.environ:
        world = cp if dry_run else 1
        if not dry_run:
            os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"})
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29533")
        return world, 0, 0
    return (int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"]),
            int(os.environ.get("LOCAL_RANK", "0")))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    world, rank, local_rank = _environment_layout(args.cp, args.dry_run)
    args.device = local_rank  # result_record names this GPU

    def bad_input(message):
        if rank == 0:
            ref._log(f"torch_context_parallel: error: {message}")
        return 2

    if world % args.cp:
        return bad_input(f"--cp {args.cp} must divide the number of processes ({world})")
    dp = world // args.cp
    if args.gbs is None:
        args.gbs = dp * args.mbs
    if args.gbs < 1 or args.gbs % (dp * args.mbs):
        return bad_input(f"--gbs {args.gbs} must be a positive multiple of dp x mbs = "
                         f"{dp} x {args.mbs}")
    try:
        spec = ref.load_model_spec(args.model, seq_length=args.seq_length,
                                   warn=lambda m: ref._log(f"note: {m}") if rank == 0 else None)
    except ref.ConfigError as e:
        for problem in e.problems:
            bad_input(problem)
        return 2
    if spec.is_moe:
        return bad_input(f"{spec.name}: MoE presets are not benchmarked with context parallelism "
                         f"here (dense models only)")
    if spec.seq_length % (2 * args.cp):
        return bad_input(f"sequence length {spec.seq_length} must be a multiple of 2 cp = "
                         f"{2 * args.cp} (the load balancer's 2 cp chunks)")
    layout = Layout(world, rank, local_rank, args.cp)

    def emit(record):
        if args.json:
            _emit(json.dumps(record))
        else:
            print_summary(record)

    def error_record(**fields):
        return cp_record(args, spec, layout, rank=rank, **fields)

    if args.dry_run:
        if rank == 0:
            emit(cp_record(args, spec, layout, dry_run=True, description=spec.describe()))
        return 0
    if torch is None:
        emit(error_record(error="PyTorch is not installed (import torch failed)"))
        return 1
    if not torch.cuda.is_available() or torch.cuda.device_count() <= local_rank:
        args.device = 0  # result_record names GPU args.device, when there is one
        emit(error_record(error=f"no CUDA GPU {local_rank} is visible to PyTorch"))
        return 1
    if rank == 0:
        ref._log(f"{spec.describe()}; {ref.parameter_count(spec) / 1e9:.3f} B parameters; world "
                 f"{world} = dp {layout.dp} x cp {layout.cp}, {spec.seq_length // layout.cp} tokens "
                 f"per rank, mode {args.mode}, rotate {args.rotate}, compile {not args.no_compile}; "
                 f"torch {torch.__version__} on {torch.cuda.get_device_name(local_rank)}")
    watchdog = Watchdog(args.time_limit_s, error_record)
    try:
        measured = run(args, spec, layout, watchdog)
    except Exception as e:  # noqa: BLE001 -- the driver needs a JSON line whatever happened
        traceback.print_exc(file=sys.stderr)
        detail = f"{type(e).__name__}: {str(e)[:1500]}"
        if ref._is_out_of_memory(e):
            emit(error_record(error="out of memory", phase=watchdog.phase, detail=detail[:500]))
        else:
            emit(error_record(error=detail, phase=watchdog.phase))
        # Exit without tearing the process group down: a peer may be waiting in a collective.
        sys.stderr.flush()
        os._exit(1)
    watchdog.cancel()
    if rank == 0:
        emit(cp_record(args, spec, layout, **measured))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
