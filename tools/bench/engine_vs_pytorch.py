#!/usr/bin/env python3
"""Train the same models with sextant's engine and with PyTorch on one GPU, and compare speeds.

For each model, one after the other on the same GPU (never two runs at once):
  1. sextant  <sextant> --configs <repo>/configs run --model NAME --layout mbs=M,gbs=M
                  --data synthetic --steps S --format json
              (median step time over steps 4..S; the last stdout line is one JSON object)
  2. torch    python3 tools/bench/torch_reference.py --model <yaml> --mbs M --steps S
                  --warmup W --mode amp --json
  3. torch    the same with --mode bf16
Each is a subprocess with a time limit (--timeout); its stdout, stderr and command line are saved
under --out as <model>.<run>.{stdout,stderr,cmd}. A nonzero exit code or a missing final JSON line
is a failed run (its stderr tail is kept); out of GPU memory is reported as OOM.

Written under --out after every run (so a run cut short keeps what it did):
  results.json  settings, per model its parameter count and FLOPs per token, per run the status,
                command, exit code, wall time, the run's own JSON, tokens/s, MFU and peak memory
  table.md      the table below
Printed last on stdout: a Markdown table
  model | sextant tok/s | MFU | torch AMP tok/s | MFU | torch bf16 tok/s | MFU |
  ratio vs faster torch | sextant peak GiB | torch peak GiB (amp, bf16)

Every MFU in the table is computed here, with one formula for all three columns:
flops_per_token * tokens/s / --peak-flops, flops_per_token = 6 P + 12 L (heads * head_dim) s
(torch_reference.flops_per_token; Narayanan et al. 2021, eq. 3). The engine's own MFU (the
simulator's matmul-only count, about 0.3 % lower for GPT-1.3B) stays in results.json.
MoE presets (configs/models/moe-*.yaml) are accepted: P is then the active parameters (the router
and router_topk experts per MoE layer, as Megatron's MoE FLOP count; results.json has both
"parameters" and "active_parameters"), and the torch runs get --moe-impl (default auto: grouped
GEMM when torch._grouped_mm works, else one matmul per expert). The engine's own reported MFU
counts its own way and is kept, not compared, as for dense models.

Usage (on the GPU machine, from anywhere):
  python3 tools/bench/engine_vs_pytorch.py --sextant build-gpu/tools/sextant \\
      --models gpt-350m,gpt-1.3b,gpt-2.7b,gpt-6.7b --mbs 4 --steps 30 --out DIR
  python3 tools/bench/engine_vs_pytorch.py ... --dry-run    # print the commands; run nothing

Exit code: 0 when every run ended with a result or out of memory; 1 when one failed, timed out
or was skipped for --deadline-s; 2 for bad arguments or model files.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import torch_reference as ref  # noqa: E402  -- model files, parameter and FLOP counts

TORCH_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_reference.py")
DEFAULT_MODELS = "gpt-350m,gpt-1.3b,gpt-2.7b,gpt-6.7b"
DEFAULT_SEXTANT = os.path.join(ref.REPO_ROOT, "build-gpu", "tools", "sextant")
RUN_KINDS = ("sextant", "torch-amp", "torch-bf16")
ENGINE_KEYS = ("tokens_per_s", "mfu", "peak_memory_bytes", "step_time_s")
STDERR_TAIL_CHARS = 2000
KILL_GRACE_S = 10  # between SIGTERM and SIGKILL of a run past its limit
MIN_RUN_S = 30     # with --deadline-s, a run is not started with less time than this left
GIB = 1024 ** 3


def log(message):
    print(message, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- commands

def engine_command(args, model):
    cmd = [args.sextant, "--configs", os.path.join(ref.REPO_ROOT, "configs"), "run",
           "--model", model["arg"], "--layout", f"mbs={args.mbs},gbs={args.mbs}",
           "--data", "synthetic", "--steps", str(args.steps), "--format", "json"]
    if args.seq_length:
        cmd += ["--seq-length", str(args.seq_length)]
    return cmd


def torch_command(args, model, mode):
    cmd = [args.python, TORCH_REFERENCE, "--model", model["path"], "--mbs", str(args.mbs),
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--mode", mode,
           "--peak-flops", repr(args.peak_flops), "--json"]
    if args.seq_length:
        cmd += ["--seq-length", str(args.seq_length)]
    if args.torch_no_compile:
        cmd.append("--no-compile")
    if model["spec"].is_moe:
        cmd += ["--moe-impl", args.moe_impl]
    return cmd


def planned_runs(args, models):
    """[(model, kind, command)] in the order they run: per model sextant, torch AMP, torch bf16."""
    runs = []
    for model in models:
        if not args.skip_engine:
            runs.append((model, "sextant", engine_command(args, model)))
        if not args.skip_torch:
            runs.append((model, "torch-amp", torch_command(args, model, "amp")))
            runs.append((model, "torch-bf16", torch_command(args, model, "bf16")))
    return runs


# ----------------------------------------------------------------------------- running

def execute(command, timeout_s, stdout_path, stderr_path):
    """Runs `command` with its output going straight to files (kept if it is killed).
    Returns (exit code or None when killed at the limit, wall seconds)."""
    start = time.monotonic()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        try:
            # Its own session, so that a run past its limit is ended with every process it
            # started (torch.compile's workers), and only those.
            proc = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as e:
            err.write(f"cannot start {command[0]}: {e}\n".encode())
            return 127, time.monotonic() - start
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
            for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            proc.wait()
    return code, time.monotonic() - start


def last_json_object(stdout_text):
    """The JSON object on the last non-empty line of stdout, or None."""
    lines = [line for line in stdout_text.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        value = json.loads(lines[-1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _tail(text, chars=STDERR_TAIL_CHARS):
    return text if len(text) <= chars else "..." + text[-chars:]


def _looks_out_of_memory(text):
    t = text.lower()
    return "out of memory" in t or "need more memory" in t or "cudaerrormemoryallocation" in t


def interpret(kind, code, stdout_text, stderr_text, timeout_s):
    """Status and figures of one finished run: status is ok, oom, failed or timeout."""
    record = {"returncode": code}
    result = last_json_object(stdout_text)
    if result is not None:
        record["result"] = result
    if code is None:
        record.update(status="timeout", error=f"killed after the {timeout_s:.0f} s limit",
                      stderr_tail=_tail(stderr_text))
        return record
    if kind == "sextant":
        missing = [k for k in ENGINE_KEYS if result is None or k not in result]
        if code == 0 and not missing:
            record["status"] = "ok"
            return record
        if code != 0:
            error = f"exit code {code}"
        elif result is None:
            error = "no JSON object on the last line of stdout"
        else:
            error = f"JSON without {', '.join(missing)}"
        record.update(status="oom" if code != 0 and _looks_out_of_memory(stderr_text) else "failed",
                      error=error, stderr_tail=_tail(stderr_text))
        return record
    if result is None:
        record.update(status="oom" if _looks_out_of_memory(stderr_text) else "failed",
                      error=f"exit code {code}, no JSON object on the last line of stdout",
                      stderr_tail=_tail(stderr_text))
    elif result.get("error") == "out of memory":
        record.update(status="oom", error="out of memory", stderr_tail=_tail(stderr_text))
    elif "error" in result or code != 0 or "tokens_per_s" not in result:
        record.update(status="failed",
                      error=str(result.get("error", f"exit code {code}, no tokens_per_s")),
                      stderr_tail=_tail(stderr_text))
    else:
        record["status"] = "ok"
    return record


def add_figures(record, kind, spec, peak_flops):
    """tokens/s, MFU (this file's formula) and peak memory of an ok run, at the run's own seq."""
    if record.get("status") != "ok":
        return
    result = record["result"]
    seq = result.get("seq_length" if kind == "sextant" else "seq", spec.seq_length)
    record["seq"] = seq
    record["tokens_per_s"] = float(result["tokens_per_s"])
    record["mfu"] = ref.mfu(spec, record["tokens_per_s"], peak_flops, seq_length=seq)
    record["peak_memory_bytes"] = result.get("peak_memory_bytes")
    if kind == "sextant":
        record["engine_reported_mfu"] = result.get("mfu")


# ----------------------------------------------------------------------------- the table

TABLE_HEADER = ("model", "sextant tok/s", "MFU", "torch AMP tok/s", "MFU", "torch bf16 tok/s",
                "MFU", "ratio vs faster torch", "sextant peak GiB", "torch peak GiB (amp, bf16)")
STATUS_CELL = {"oom": "OOM", "failed": "failed", "timeout": "timeout", "skipped": "skipped"}


def faster_torch(runs):
    """(kind, tokens/s) of the faster torch run that finished, or None."""
    done = [(runs[k]["tokens_per_s"], k) for k in ("torch-amp", "torch-bf16")
            if runs.get(k, {}).get("status") == "ok"]
    if not done:
        return None
    tokens_per_s, kind = max(done)
    return kind, tokens_per_s


def speed_ratio(runs):
    """sextant tokens/s over the faster torch run's, or None when either is missing."""
    best = faster_torch(runs)
    if best is None or runs.get("sextant", {}).get("status") != "ok":
        return None
    return runs["sextant"]["tokens_per_s"] / best[1]


def _speed_cells(run):
    if run is None:
        return ["-", "-"]
    if run.get("status") != "ok":
        return [STATUS_CELL.get(run.get("status"), "?"), "-"]
    return [f"{run['tokens_per_s']:,.0f}", f"{100 * run['mfu']:.1f} %"]


def _gib(run):
    if run is None:
        return "-"
    if run.get("status") != "ok":
        return STATUS_CELL.get(run.get("status"), "?")
    peak = run.get("peak_memory_bytes")
    return "?" if peak is None else f"{peak / GIB:.1f}"


def render_table(models_results):
    """Markdown table, one row per model in the order given: {name: {"runs": {kind: record}}}."""
    rows = []
    for name, entry in models_results.items():
        runs = entry.get("runs", {})
        ratio = speed_ratio(runs)
        best = faster_torch(runs)
        ratio_cell = "-" if ratio is None else f"{ratio:.2f} (vs {best[0][len('torch-'):]})"
        row = [name]
        for kind in RUN_KINDS:
            row += _speed_cells(runs.get(kind))
        row += [ratio_cell, _gib(runs.get("sextant")),
                f"{_gib(runs.get('torch-amp'))}, {_gib(runs.get('torch-bf16'))}"]
        rows.append(row)
    widths = [max([len(TABLE_HEADER[i])] + [len(r[i]) for r in rows])
              for i in range(len(TABLE_HEADER))]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    separator = "|" + "|".join(("-" * (w + 1) + ":") if i else ("-" * (w + 2))
                               for i, w in enumerate(widths)) + "|"
    return "\n".join([line(TABLE_HEADER), separator] + [line(r) for r in rows])


def table_notes(args):
    timing = []
    if not args.skip_engine:
        timing.append(f"sextant: median of steps 4-{args.steps}")
    if not args.skip_torch:
        timing.append(f"torch: median of {args.steps} steps after {args.warmup} warm-up, "
                      f"{'eager' if args.torch_no_compile else 'torch.compile'}")
    return (f"MFU = (6 P + 12 L a d s) x tokens/s / {args.peak_flops / 1e12:.1f} TFLOP/s in every "
            f"column. Peak memory: sextant = device memory in use (CUDA context included); "
            f"torch = torch.cuda.max_memory_allocated (results.json also has reserved and "
            f"device-in-use). mbs {args.mbs}; {'; '.join(timing)}.")


# ----------------------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Compare the training speed of sextant's engine with PyTorch on one GPU "
                    "(same models, one run at a time).")
    p.add_argument("--sextant", default=DEFAULT_SEXTANT,
                   help="the sextant binary with the engine (default: <repo>/build-gpu/tools/sextant)")
    p.add_argument("--models", default=DEFAULT_MODELS,
                   help=f"comma-separated presets (configs/models/NAME.yaml) or YAML paths "
                        f"(default {DEFAULT_MODELS})")
    p.add_argument("--mbs", type=int, default=4, help="micro-batch = global batch (default 4)")
    p.add_argument("--moe-impl", choices=ref.MOE_IMPLS, default="auto",
                   help="torch_reference.py's --moe-impl for MoE presets (default auto)")
    p.add_argument("--steps", type=int, default=30,
                   help="sextant: steps in all (median of 4..S); torch: timed steps (default 30)")
    p.add_argument("--warmup", type=int, default=10,
                   help="torch: untimed steps before the timed ones, compilation included (default 10)")
    p.add_argument("--seq-length", type=int, help="sequence length for both (default: the model's)")
    p.add_argument("--out", required=True, help="folder for the raw outputs and results.json")
    p.add_argument("--timeout", type=float, default=1200,
                   help="seconds one run may take before it is killed (default 1200)")
    p.add_argument("--deadline-s", type=float,
                   help="seconds the whole benchmark may take: runs get at most what is left, and "
                        f"none starts with less than {MIN_RUN_S} s left (default: no limit)")
    p.add_argument("--skip-engine", action="store_true", help="run only the PyTorch reference")
    p.add_argument("--skip-torch", action="store_true", help="run only the engine")
    p.add_argument("--torch-no-compile", action="store_true", help="PyTorch in eager mode")
    p.add_argument("--peak-flops", type=float, default=ref.H100_SXM_PEAK_BF16_FLOPS_PER_S,
                   help="peak FLOP/s of every MFU (default 989.4e12: H100 SXM bf16 dense)")
    p.add_argument("--python", default=sys.executable,
                   help="the Python that has torch (default: this one)")
    p.add_argument("--dry-run", action="store_true",
                   help="check the models, print the commands and the model counts; run nothing")
    args = p.parse_args(argv)
    problems = []
    for name in ("mbs", "steps"):
        if getattr(args, name) < 1:
            problems.append(f"--{name} {getattr(args, name)}: must be at least 1")
    if args.steps < 4 and not args.skip_engine:
        problems.append(f"--steps {args.steps}: sextant times steps 4..S; give at least 4")
    if args.warmup < 0:
        problems.append(f"--warmup {args.warmup}: must be at least 0")
    if args.seq_length is not None and args.seq_length < 1:
        problems.append(f"--seq-length {args.seq_length}: must be at least 1")
    if args.timeout <= 0:
        problems.append(f"--timeout {args.timeout}: must be positive")
    if args.deadline_s is not None and args.deadline_s <= MIN_RUN_S:
        problems.append(f"--deadline-s {args.deadline_s}: must be more than {MIN_RUN_S}")
    if args.peak_flops <= 0:
        problems.append(f"--peak-flops {args.peak_flops}: must be positive")
    if args.skip_engine and args.skip_torch:
        problems.append("--skip-engine and --skip-torch together leave nothing to run")
    args.model_names = [m.strip() for m in args.models.split(",") if m.strip()]
    if not args.model_names:
        problems.append(f"--models '{args.models}': no model named")
    if not args.skip_engine and not args.dry_run and not os.access(args.sextant, os.X_OK):
        problems.append(f"--sextant {args.sextant}: not an executable file (build the engine "
                        f"with the CUDA toolkit, or give --skip-engine)")
    if problems:
        for problem in problems:
            print(f"engine_vs_pytorch: error: {problem}", file=sys.stderr)
        sys.exit(2)
    return args


def load_models(args):
    """[{name, arg, path, spec}] or exit 2 listing every model file problem."""
    models, problems = [], []
    for name in args.model_names:
        try:
            spec = ref.load_model_spec(name, seq_length=args.seq_length,
                                       warn=lambda m: log(f"note: {m}"))
        except ref.ConfigError as e:
            problems += e.problems
            continue
        models.append({"name": spec.name, "arg": name, "path": ref.resolve_model_path(name),
                       "spec": spec})
    if problems:
        for problem in problems:
            print(f"engine_vs_pytorch: error: {problem}", file=sys.stderr)
        sys.exit(2)
    return models


def _file_stem(model, kind):
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in model["name"]) + "." + kind


def save_results(out_dir, summary, args):
    with open(os.path.join(out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "table.md"), "w", encoding="utf-8") as f:
        f.write(render_table(summary["models"]) + "\n\n" + table_notes(args) + "\n")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    models = load_models(args)
    runs = planned_runs(args, models)
    summary = {
        "settings": {k: getattr(args, k) for k in (
            "sextant", "mbs", "steps", "warmup", "seq_length", "timeout", "deadline_s",
            "skip_engine", "skip_torch", "torch_no_compile", "peak_flops", "python",
            "moe_impl")},
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "models": {},
    }
    summary["settings"]["models"] = args.model_names
    for m in models:
        spec = m["spec"]
        summary["models"][m["name"]] = {
            "file": m["path"], "parameters": ref.parameter_count(spec),
            "flops_per_token": ref.flops_per_token(spec), "seq": spec.seq_length, "runs": {}}
        if spec.is_moe:
            summary["models"][m["name"]]["active_parameters"] = ref.parameter_count(spec, active=True)

    if args.dry_run:
        for m in models:
            s = m["spec"]
            print(f"# {s.describe()}")
            if s.is_moe:
                print(f"#   MoE: {ref.parameter_count(s, active=True) / 1e9:.3f} B of the "
                      f"parameters active per token (FLOPs count these)")
            print(f"#   {ref.parameter_count(s) / 1e9:.3f} B parameters, "
                  f"{ref.flops_per_token(s) / 1e9:.3f} GFLOP/token; at "
                  f"{100:.0f} % MFU {args.peak_flops / ref.flops_per_token(s):,.0f} tokens/s")
        for m, kind, cmd in runs:
            print(f"{m['name']:>12} {kind:<10} timeout {args.timeout:.0f} s: {shlex.join(cmd)}")
        if not args.skip_engine and not os.access(args.sextant, os.X_OK):
            log(f"note: {args.sextant} is not an executable file here; the real run needs it")
        print(f"outputs would go to {os.path.abspath(args.out)}/ (results.json, table.md, "
              f"<model>.<run>.stdout|stderr|cmd)")
        return 0

    os.makedirs(args.out, exist_ok=True)
    start = time.monotonic()
    any_failed = False
    for i, (model, kind, cmd) in enumerate(runs, start=1):
        entry = summary["models"][model["name"]]
        stem = os.path.join(args.out, _file_stem(model, kind))
        limit_s = args.timeout
        if args.deadline_s is not None:
            left_s = args.deadline_s - (time.monotonic() - start)
            if left_s < MIN_RUN_S:
                entry["runs"][kind] = {"status": "skipped", "command": cmd,
                                       "error": f"--deadline-s {args.deadline_s:.0f} reached"}
                log(f"[{i}/{len(runs)}] {model['name']} {kind}: skipped, deadline reached")
                any_failed = True
                save_results(args.out, summary, args)
                continue
            limit_s = min(limit_s, left_s)
        with open(stem + ".cmd", "w", encoding="utf-8") as f:
            f.write(shlex.join(cmd) + "\n")
        log(f"[{i}/{len(runs)}] {model['name']} {kind}: {shlex.join(cmd)}")
        code, wall_s = execute(cmd, limit_s, stem + ".stdout", stem + ".stderr")
        with open(stem + ".stdout", encoding="utf-8", errors="replace") as f:
            stdout_text = f.read()
        with open(stem + ".stderr", encoding="utf-8", errors="replace") as f:
            stderr_text = f.read()
        record = {"command": cmd, "wall_s": round(wall_s, 1),
                  "stdout_file": stem + ".stdout", "stderr_file": stem + ".stderr"}
        record.update(interpret(kind, code, stdout_text, stderr_text, limit_s))
        add_figures(record, kind, model["spec"], args.peak_flops)
        entry["runs"][kind] = record
        ratio = speed_ratio(entry["runs"])
        entry["ratio_vs_faster_torch"] = ratio
        if record["status"] == "ok":
            log(f"    ok in {wall_s:.0f} s: {record['tokens_per_s']:,.0f} tokens/s, "
                f"MFU {100 * record['mfu']:.1f} %")
        else:
            any_failed = any_failed or record["status"] in ("failed", "timeout")
            log(f"    {record['status']} after {wall_s:.0f} s: {record.get('error', '')}")
        save_results(args.out, summary, args)

    summary["finished"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    save_results(args.out, summary, args)
    for name, entry in summary["models"].items():
        for kind, run in entry["runs"].items():
            if run.get("status") not in ("ok", None):
                first = (run.get("stderr_tail") or "").strip().splitlines()[-1:] or [""]
                print(f"{name} {kind}: {run['status']}: {run.get('error', '')}"
                      + (f" -- {first[0][:200]}" if first[0] else ""))
    print(table_notes(args))
    print()
    print(render_table(summary["models"]))
    return 1 if any_failed else 0


if __name__ == "__main__":
    sys.exit(main())
