#!/usr/bin/env python3
"""Measure calibration figures for sextant's cost model on one CUDA GPU (PyTorch, bf16).

Writes, under --out:
  gemm.csv       m,n,k,flops,time_s,tflops_per_s      cuBLAS bf16 GEMM via torch.mm (C = A @ B)
  attention.csv  b,heads,s,d,pass,backend,flops,time_s,tflops_per_s   causal SDPA
  memory.csv     op,bytes,time_s,bytes_per_s          copy_, a + b, GELU (bytes = read + write)
  launch.csv     op,time_s                            per-kernel overheads
  device.txt     device properties, versions, nvidia-smi, date

Usage:
  python3 tools/calibration/measure_gpu.py --out DIR            # on a CUDA machine
  python3 tools/calibration/measure_gpu.py --out DIR --dry-run  # no GPU/torch needed: shape lists,
                                                                # CSV writing, time estimate

Timing method (GEMM, attention, memory): inputs are allocated and filled with torch.randn before
timing; 3 warm-up calls; then one window of n back-to-back calls timed with CUDA events, with
n = clamp(ceil(20 ms / t_warmup), MIN_ITERS, 50); time_s is window / n. Before each window a
GPU spin kernel (torch.cuda._sleep) lets the host queue the calls ahead of the GPU, so short
kernels are timed back to back rather than at the host's launch rate. Small operands rotate
through several buffer sets (>= 2, together >= 2x the 50 MB L2) so they are not served from L2.
CSV rows are written and flushed as they are measured, so a run cut short keeps what it did.
"""

import argparse
import csv
import datetime
import math
import os
import platform
import subprocess
import sys
import time

L2_BYTES = 50 * 1024 * 1024
MAX_SET_BYTES = 8 * 1024 ** 3          # skip GEMMs whose A+B+C exceed ~8 GiB
MIN_WINDOW_S = 0.020
MAX_ITERS = 50
MIN_ITERS = 5
WARMUP = 3

# ----------------------------------------------------------------------------- shape lists

HIDDEN = [1024, 2048, 2304, 3072, 4096, 6144, 8192, 10240, 12288, 16384, 18432, 20480, 25600]
TP = [1, 2, 4, 8]
M_ALL = [1024, 2048, 4096, 8192, 16384]
LOGIT_HIDDEN = [2048, 4096, 8192, 12288]
VOCABS = [131072, 51200]


def gemm_bytes(m, n, k, elt=2):
    return elt * (m * k + k * n + m * n)


def gemm_shapes():
    """Deduplicated (m, n, k) list. M = 4096 shapes (all t) come first, then the M sweep for
    t in {1, 8}, then for t in {2, 4}, so that a budget cut-off drops only the tail of the
    M sweep, not whole layer types."""
    nk_by_t = {}
    for t in TP:
        pairs = []
        for h in HIDDEN:
            for n, k in ((3 * h // t, h),      # QKV
                         (h, h // t),          # attention output projection
                         (4 * h // t, h),      # MLP fc1
                         (h, 4 * h // t)):     # MLP fc2
                pairs.append((n, k))
        for h in LOGIT_HIDDEN:
            for v in VOCABS:
                pairs.append((v // t, h))      # logits
        nk_by_t[t] = pairs
    shapes, seen = [], set()

    def add(m, n, k):
        key = (m, n, k)
        if key in seen or gemm_bytes(m, n, k) > MAX_SET_BYTES:
            return
        seen.add(key)
        shapes.append(key)

    for t in TP:                               # pass 1: M = 4096, all t
        for n, k in nk_by_t[t]:
            add(4096, n, k)
    for ts in ((1, 8), (2, 4)):                # pass 2: M sweep for t in {1, 8}; pass 3: t in {2, 4}
        for m in M_ALL:
            for t in ts:
                for n, k in nk_by_t[t]:
                    add(m, n, k)
    return shapes


def attention_configs():
    """(b, heads, s, d); b * s = 8192 tokens."""
    out = []
    for d in (64, 128):
        for s in (2048, 4096, 8192):
            b = max(1, 8192 // s)
            for heads in (8, 16, 32, 64):
                out.append((b, heads, s, d))
    return out


def attn_fwd_flops(b, h, s, d):
    return 4 * b * h * s * s * d // 2          # causal: half of QK^T and PV


MEM_SIZES = [256 * 2 ** 20, 512 * 2 ** 20, 1024 * 2 ** 20, 2048 * 2 ** 20]   # bytes per tensor

# ----------------------------------------------------------------------------- output


class CsvOut:
    def __init__(self, path, columns):
        self.f = open(path, "w", newline="")
        self.w = csv.writer(self.f)
        self.w.writerow(columns)
        self.f.flush()

    def row(self, *vals):
        self.w.writerow([fmt(v) for v in vals])
        self.f.flush()

    def close(self):
        self.f.close()


def fmt(v):
    if isinstance(v, float):
        return "%.6g" % v
    return str(v)


def log(msg):
    print("[%7.1fs] %s" % (time.time() - T0, msg), flush=True)


T0 = time.time()
DEVICE = "cuda"        # a test harness may point this elsewhere; the run itself always uses CUDA

# ----------------------------------------------------------------------------- dry run


def model_time(flops, nbytes):
    """Rough H100 estimate used only by --dry-run to size the sweep."""
    return max(flops / 650e12, nbytes / 2.8e12, 6e-6)


def iters_for(t_est):
    return max(MIN_ITERS, min(MAX_ITERS, math.ceil(MIN_WINDOW_S / max(t_est, 1e-9))))


def dry_run(out):
    shapes = gemm_shapes()
    g = CsvOut(os.path.join(out, "gemm.csv"), ["m", "n", "k", "flops", "time_s", "tflops_per_s"])
    total = 0.0
    for m, n, k in shapes:
        fl = 2 * m * n * k
        t = model_time(fl, gemm_bytes(m, n, k))
        n_it = iters_for(t)
        # per shape: randn fill of buffer sets + warm-up + window + host overhead
        nsets = n_sets(gemm_bytes(m, n, k))
        total += nsets * gemm_bytes(m, n, k) / 1.5e12 + (WARMUP + n_it) * t + 0.004
        g.row(m, n, k, fl, t, fl / t / 1e12)
    g.close()
    log("gemm: %d shapes, estimated %.0f s on an H100" % (len(shapes), total))
    a = CsvOut(os.path.join(out, "attention.csv"),
               ["b", "heads", "s", "d", "pass", "backend", "flops", "time_s", "tflops_per_s"])
    at = 0.0
    cfgs = attention_configs()
    for b, h, s, d in cfgs:
        for backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
            f = attn_fwd_flops(b, h, s, d)
            for p, fl in (("fwd", f), ("fwd_bwd", 3.5 * f)):
                t = fl / 400e12
                at += (WARMUP + iters_for(t)) * t + 0.005
                a.row(b, h, s, d, p, backend, int(fl), t, fl / t / 1e12)
    a.close()
    log("attention: %d configs x 2 backends, estimated %.0f s" % (len(cfgs), at))
    mcsv = CsvOut(os.path.join(out, "memory.csv"), ["op", "bytes", "time_s", "bytes_per_s"])
    for sz in MEM_SIZES:
        for op, mult in (("copy", 2), ("add", 3), ("gelu", 2)):
            t = mult * sz / 3e12
            mcsv.row(op, mult * sz, t, mult * sz / t)
    mcsv.close()
    lc = CsvOut(os.path.join(out, "launch.csv"), ["op", "time_s"])
    lc.row("dry_run", 0.0)
    lc.close()
    with open(os.path.join(out, "device.txt"), "w") as f:
        f.write("dry run on %s, %s\n" % (platform.node(), datetime.datetime.now(datetime.timezone.utc).isoformat()))
    log("dry run done")


def n_sets(set_bytes):
    """Buffer sets to rotate through: >= 2 and together >= 2x L2 (capped at 64)."""
    return min(64, max(2, math.ceil(2 * L2_BYTES / max(set_bytes, 1))))

# ----------------------------------------------------------------------------- GPU part


def main_gpu(args):
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        sys.exit("measure_gpu.py: CUDA is not available (torch %s); this script needs a GPU "
                 "(use --dry-run to check shapes and CSV writing without one)" % torch.__version__)
    dev = torch.device(DEVICE)
    torch.manual_seed(0)
    out = args.out
    deadline = T0 + args.budget_s
    have_sleep = hasattr(torch.cuda, "_sleep")

    def prefill(n_calls):
        # keep the GPU busy while the host queues n_calls launches (~20 us each, at most 5 ms)
        if have_sleep:
            torch.cuda._sleep(int(min(n_calls * 20e-6, 5e-3) * 2.0e9))

    def window(fn, n):
        """Mean time of one call of fn(i), i = 0..n-1, back to back on the GPU."""
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        prefill(n)
        s.record()
        for i in range(n):
            fn(i)
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / 1e3 / n

    def measure(fn):
        t_w = window(fn, WARMUP)
        n = iters_for(t_w)
        t = window(fn, n)
        return t, n

    def smi(q="clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu"):
        try:
            return subprocess.run(["nvidia-smi", "--query-gpu=" + q, "--format=csv"],
                                  capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception as ex:  # noqa: BLE001
            return "nvidia-smi failed: %r" % ex

    smi_log = [("start", smi())]
    write_device_txt(os.path.join(out, "device.txt"), torch, smi_log, args)   # rewritten at the end

    # ---- sanity check of the bf16 GEMM path against fp32
    a = torch.randn(1024, 512, device=dev, dtype=torch.bfloat16)
    b = torch.randn(512, 768, device=dev, dtype=torch.bfloat16)
    ref = a.float() @ b.float()
    err = ((a @ b).float() - ref).norm() / ref.norm()
    log("sanity: bf16 GEMM rel. error vs fp32 = %.2e" % err.item())
    if not (err.item() < 2e-2):
        sys.exit("bf16 GEMM sanity check failed")
    del a, b, ref

    # ---- 1. GEMM
    shapes = gemm_shapes()
    log("gemm: %d shapes (budget %.0f s)" % (len(shapes), args.gemm_budget_s))
    g = CsvOut(os.path.join(out, "gemm.csv"), ["m", "n", "k", "flops", "time_s", "tflops_per_s"])
    g_end = time.time() + args.gemm_budget_s
    done = 0
    for idx, (m, n, k) in enumerate(shapes):
        if time.time() > g_end or time.time() > deadline - 120:
            log("gemm: budget reached, skipping the last %d shapes" % (len(shapes) - idx))
            break
        try:
            ns = n_sets(gemm_bytes(m, n, k))
            A = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _ in range(ns)]
            B = [torch.randn(k, n, device=dev, dtype=torch.bfloat16) for _ in range(ns)]
            C = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in range(ns)]
            t, it = measure(lambda i: torch.mm(A[i % ns], B[i % ns], out=C[i % ns]))
        except torch.cuda.OutOfMemoryError:
            log("gemm %dx%dx%d: out of memory, skipped" % (m, n, k))
            A = B = C = None
            torch.cuda.empty_cache()
            continue
        fl = 2 * m * n * k
        g.row(m, n, k, fl, t, fl / t / 1e12)
        done += 1
        if idx % 25 == 0 or fl / t < 300e12 and m * n * k >= 2 ** 33:
            log("gemm %4d/%d m=%5d n=%6d k=%5d sets=%2d iters=%2d  %.3e s  %6.1f TFLOP/s"
                % (idx + 1, len(shapes), m, n, k, ns, it, t, fl / t / 1e12))
        del A, B, C
        if gemm_bytes(m, n, k) > 2 ** 30:
            torch.cuda.empty_cache()
    g.close()
    torch.cuda.empty_cache()
    log("gemm: %d shapes measured" % done)
    smi_log.append(("after gemm", smi()))

    # ---- 2. attention
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("FLASH_ATTENTION", SDPBackend.FLASH_ATTENTION)]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        backends.append(("CUDNN_ATTENTION", SDPBackend.CUDNN_ATTENTION))
    a_csv = CsvOut(os.path.join(out, "attention.csv"),
                   ["b", "heads", "s", "d", "pass", "backend", "flops", "time_s", "tflops_per_s"])
    for b_, h, s, d in attention_configs():
        if time.time() > deadline - 60:
            log("attention: budget reached, stopping")
            break
        ns = n_sets(3 * b_ * h * s * d * 2)
        Q = [torch.randn(b_, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(ns)]
        K = [torch.randn(b_, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(ns)]
        V = [torch.randn(b_, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(ns)]
        G = torch.randn(b_, h, s, d, device=dev, dtype=torch.bfloat16)
        f_fwd = attn_fwd_flops(b_, h, s, d)
        for name, be in backends:
            def fwd(i):
                with torch.no_grad():
                    F.scaled_dot_product_attention(Q[i % ns], K[i % ns], V[i % ns], is_causal=True)

            def fwd_bwd(i):
                q, k_, v = Q[i % ns], K[i % ns], V[i % ns]
                o = F.scaled_dot_product_attention(q, k_, v, is_causal=True)
                torch.autograd.grad(o, (q, k_, v), G)
            try:
                with sdpa_kernel([be]):
                    t_f, _ = measure(fwd)
                    t_fb, _ = measure(fwd_bwd)
            except RuntimeError as ex:
                log("attention %s b=%d h=%d s=%d d=%d: not run (%s)"
                    % (name, b_, h, s, d, str(ex).splitlines()[0][:160]))
                continue
            a_csv.row(b_, h, s, d, "fwd", name, f_fwd, t_f, f_fwd / t_f / 1e12)
            f_fb = int(3.5 * f_fwd)
            a_csv.row(b_, h, s, d, "fwd_bwd", name, f_fb, t_fb, f_fb / t_fb / 1e12)
            if t_fb > t_f:   # derived: (fwd+bwd) - fwd, flops 2.5x fwd
                f_b = int(2.5 * f_fwd)
                a_csv.row(b_, h, s, d, "bwd_derived", name, f_b, t_fb - t_f, f_b / (t_fb - t_f) / 1e12)
            log("attention %-15s b=%d h=%2d s=%4d d=%3d  fwd %6.1f  fwd+bwd %6.1f TFLOP/s"
                % (name, b_, h, s, d, f_fwd / t_f / 1e12, 3.5 * f_fwd / t_fb / 1e12))
        del Q, K, V, G
    a_csv.close()
    torch.cuda.empty_cache()

    # ---- 3. memory bandwidth
    m_csv = CsvOut(os.path.join(out, "memory.csv"), ["op", "bytes", "time_s", "bytes_per_s"])
    for sz in MEM_SIZES:
        numel = sz // 2
        x = torch.randn(numel, device=dev, dtype=torch.bfloat16)
        y = torch.randn(numel, device=dev, dtype=torch.bfloat16)
        z = torch.empty(numel, device=dev, dtype=torch.bfloat16)
        for op, mult, fn in (("copy", 2, lambda i: z.copy_(x)),
                             ("add", 3, lambda i: torch.add(x, y, out=z)),
                             ("gelu", 2, lambda i: F.gelu(x))):
            t, _ = measure(fn)
            m_csv.row(op, mult * sz, t, mult * sz / t)
            log("memory %-4s %5d MiB/tensor  %.3e s  %.3f TB/s" % (op, sz >> 20, t, mult * sz / t / 1e12))
        del x, y, z
        torch.cuda.empty_cache()
    m_csv.close()

    # ---- 4. launch overhead
    l_csv = CsvOut(os.path.join(out, "launch.csv"), ["op", "time_s"])
    one_a = torch.randn(1, device=dev)
    one_b = torch.randn(1, device=dev)
    one_c = torch.empty(1, device=dev)
    sa = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
    sb = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
    sc = torch.empty(256, 256, device=dev, dtype=torch.bfloat16)
    ops = (("add_1elem", lambda: torch.add(one_a, one_b, out=one_c)),
           ("matmul_256x256x256_bf16", lambda: torch.mm(sa, sb, out=sc)))
    N = 1000
    for name, fn in ops:
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        # (a) eager, host-paced: 1000 launches back to back from Python, CUDA events around them
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(N):
            fn()
        e.record()
        e.synchronize()
        t_eager = s.elapsed_time(e) / 1e3 / N
        # (b) host wall clock for the 1000 launch calls (no sync inside)
        torch.cuda.synchronize()
        h0 = time.perf_counter()
        for _ in range(N):
            fn()
        h1 = time.perf_counter()
        torch.cuda.synchronize()
        t_host = (h1 - h0) / N
        # (c) GPU-side back to back: 1000 launches queued behind a spin kernel
        torch.cuda.synchronize()
        if have_sleep:
            torch.cuda._sleep(int(0.05 * 2.0e9))   # 50 ms, covers queueing 1000 launches
        s.record()
        for _ in range(N):
            fn()
        e.record()
        e.synchronize()
        t_queued = s.elapsed_time(e) / 1e3 / N
        # (d) CUDA graph of 1000 launches, replayed
        t_graph = float("nan")
        try:
            st = torch.cuda.Stream()
            st.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(st):
                for _ in range(3):
                    fn()
            torch.cuda.current_stream().wait_stream(st)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(N):
                    fn()
            graph.replay()
            torch.cuda.synchronize()
            s.record()
            for _ in range(5):
                graph.replay()
            e.record()
            e.synchronize()
            t_graph = s.elapsed_time(e) / 1e3 / (5 * N)
            del graph
        except Exception as ex:  # noqa: BLE001
            log("launch %s: CUDA graph failed: %r" % (name, ex))
        # (e) round trip: launch + synchronize, host wall clock, median of 200
        rt = []
        for _ in range(200):
            h0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            rt.append(time.perf_counter() - h0)
        rt.sort()
        t_rt = rt[len(rt) // 2]
        for suffix, v in (("eager_events", t_eager), ("eager_host_call", t_host),
                          ("gpu_queued", t_queued), ("cudagraph", t_graph),
                          ("launch_sync_roundtrip_median", t_rt)):
            l_csv.row("%s_%s" % (name, suffix), v)
        log("launch %-24s eager %.2f us  host call %.2f us  queued %.2f us  graph %.2f us  roundtrip %.2f us"
            % (name, t_eager * 1e6, t_host * 1e6, t_queued * 1e6, t_graph * 1e6, t_rt * 1e6))
    l_csv.close()
    smi_log.append(("end", smi()))

    # ---- 5. device.txt
    write_device_txt(os.path.join(out, "device.txt"), torch, smi_log, args)
    log("all done in %.0f s" % (time.time() - T0))


def write_device_txt(path, torch, smi_log, args):
    def safe(label, fn):
        try:
            return "%s: %s" % (label, fn())
        except Exception as ex:  # noqa: BLE001
            return "%s: unavailable (%r)" % (label, ex)

    p = torch.cuda.get_device_properties(0)
    lines = ["date_utc: %s" % datetime.datetime.now(datetime.timezone.utc).isoformat(),
             "host: %s (%s, kernel %s)" % (platform.node(), platform.machine(), platform.release()),
             "command: %s" % " ".join([os.path.basename(sys.executable)] + sys.argv),
             "python: %s" % sys.version.split()[0],
             "torch: %s" % torch.__version__,
             "torch.version.cuda: %s" % torch.version.cuda,
             safe("cudnn", torch.backends.cudnn.version),
             safe("matmul.allow_bf16_reduced_precision_reduction",
                  lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
             safe("matmul.allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
             "device name: %s" % p.name,
             "compute capability: %d.%d" % (p.major, p.minor),
             "multi_processor_count: %d" % p.multi_processor_count,
             "total_memory_bytes: %d" % p.total_memory]
    for attr in ("L2_cache_size", "clock_rate", "memory_clock_rate", "memory_bus_width"):
        if hasattr(p, attr):
            lines.append("%s: %s" % (attr, getattr(p, attr)))
    # cuBLAS / cuBLASLt versions
    try:
        import ctypes
        lt = ctypes.CDLL("libcublasLt.so.%s" % torch.version.cuda.split(".")[0])
        lt.cublasLtGetVersion.restype = ctypes.c_size_t
        lines.append("cublasLtGetVersion: %d" % lt.cublasLtGetVersion())
    except Exception as ex:  # noqa: BLE001
        lines.append("cublasLtGetVersion: unavailable (%r)" % ex)
    try:
        libs = set()
        with open("/proc/self/maps") as f:
            for ln in f:
                pth = ln.split()[-1]
                if any(x in pth for x in ("cublas", "cudnn", "libcudart", "libnccl", "libcuda.so")):
                    libs.add(pth)
        lines.append("loaded CUDA libraries:")
        lines += ["  " + x for x in sorted(libs)]
    except Exception as ex:  # noqa: BLE001
        lines.append("loaded libraries: unavailable (%r)" % ex)
    try:
        pip = subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze"],
                             capture_output=True, text=True, timeout=60).stdout.splitlines()
        lines.append("pip (nvidia-*, torch, triton):")
        lines += ["  " + x for x in pip if x.lower().startswith(("nvidia", "torch==", "triton"))]
    except Exception as ex:  # noqa: BLE001
        lines.append("pip list failed: %r" % ex)
    lines.append("")
    for tag, s in smi_log:
        lines.append("nvidia-smi query (%s):" % tag)
        lines.append(s)
    for cmd in (["nvidia-smi"], ["nvidia-smi", "-q", "-d", "CLOCK,POWER,PERFORMANCE"]):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            lines.append("")
            lines.append("$ " + " ".join(cmd))
            lines.append(r.stdout + r.stderr)
        except Exception as ex:  # noqa: BLE001
            lines.append("$ %s failed: %r" % (" ".join(cmd), ex))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: write CSVs with modelled times")
    ap.add_argument("--budget-s", type=float, default=380.0, help="whole-run time budget (s)")
    ap.add_argument("--gemm-budget-s", type=float, default=190.0, help="GEMM sweep time budget (s)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.dry_run:
        dry_run(args.out)
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("measure_gpu.py: PyTorch is not installed here; use --dry-run without a GPU")
    main_gpu(args)


if __name__ == "__main__":
    main()
