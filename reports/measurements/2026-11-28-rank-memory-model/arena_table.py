#!/usr/bin/env python3
"""Measured peak and arena of every engine run in reports/measurements against the simulator's prediction.

    python3 arena_table.py BIN_BEFORE BIN_AFTER [GLOB ...]

Every run JSON of `sextant run --format json` that carries arena_bytes and peak_memory_bytes is
re-predicted with `sextant simulate` of its model, layout and sequence length on dgx-h100/dgx-h200 with the
measured profile of its GPU (configs/profiles/measured/, software: sextant-engine), by each binary. Prints a
Markdown table in GiB: measured peak, arena, each binary's predicted total and tensors (what the arena
holds), and measured minus predicted. Runs of one layout measured twice are listed once (the first found).
"""
import glob
import json
import subprocess
import sys

GIB = 2.0**30


def layout_of(d):
    """The run's layout with the knobs older JSONs leave out at their defaults."""
    l = {"tp": 1, "pp": 1, "vpp": 1, "dp": 1, "cp": 1, "ep": 1, "sp": False, "zero": 0, "recompute": "none",
         "tp_comm_overlap": False, "overlap_param_gather": False}
    l.update(d["layout"])
    return l


def spec(d):
    l = layout_of(d)
    knobs = [f"tp={l['tp']}", f"pp={l['pp']}", f"vpp={l['vpp']}", f"dp={l['dp']}", f"cp={l['cp']}",
             f"ep={l.get('ep', 1)}", f"mbs={l['mbs']}", f"gbs={l['gbs']}", f"sp={int(bool(l['sp']))}",
             f"recompute={l['recompute']}", f"zero={l['zero']}",
             f"tp_comm_overlap={int(bool(l['tp_comm_overlap']))}",
             f"overlap_param_gather={int(bool(l['overlap_param_gather']))}"]
    if "etp" in l:
        knobs.append(f"etp={l['etp']}")
    if l["vpp"] > 1:
        knobs.append("schedule=1f1b-interleaved")
    if l["cp"] > 1:
        knobs.append(f"cp_comm_type={l.get('cp_comm_type', 'all_gather')}")
    return ",".join(knobs)


def predict(binary, d):
    l = layout_of(d)
    gpus = l["tp"] * l["pp"] * l["dp"] * l["cp"]
    gpu = "h100" if "H100" in d.get("device", "") else "h200"
    profile = f"configs/profiles/measured/{gpu}-sxm-{'80' if gpu == 'h100' else '141'}gb.yaml"
    cmd = [binary, "simulate", "--model", d["model"], "--cluster", f"dgx-{gpu}", "--gpus", str(gpus),
           "--layout", spec(d), "--seq-length", str(d["seq_length"]), "--profile", profile, "--format", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None
    m = json.loads(out.stdout)["memory_bytes_per_gpu"]
    tensors = sum(m[k] for k in ("parameters", "gradients", "optimizer_states", "activations", "other"))
    return m["total"], tensors


def main():
    before, after = sys.argv[1], sys.argv[2]
    patterns = sys.argv[3:] or ["reports/measurements/**/*.json"]
    files = sorted({f for p in patterns for f in glob.glob(p, recursive=True)})
    seen = set()
    print("| run | model | seq | layout | measured peak | arena | old predicted | new predicted "
          "| old tensors | new tensors | peak - old | peak - new | arena - new tensors |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for f in files:
        try:
            d = json.load(open(f))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if not isinstance(d, dict) or "arena_bytes" not in d or "peak_memory_bytes" not in d or "layout" not in d:
            continue
        key = (d["model"], d["seq_length"], spec(d), d.get("device"), d["arena_bytes"])
        if key in seen:
            continue
        seen.add(key)
        old, new = predict(before, d), predict(after, d)
        if old is None or new is None:
            continue
        peak, arena = d["peak_memory_bytes"] / GIB, d["arena_bytes"] / GIB
        run = f.split("measurements/")[-1]
        l = layout_of(d)
        short = " ".join(f"{k}{l[k]}" for k in ("tp", "cp", "dp", "pp", "vpp") if l[k] > 1) + f" mbs{l['mbs']}"
        short += f" {l['recompute']}" if l["recompute"] != "none" else ""
        short += f" {l['cp_comm_type']}" if l["cp"] > 1 and "cp_comm_type" in l else ""
        print(f"| {run} | {d['model']} | {d['seq_length']} | {short} | {peak:.2f} | {arena:.2f} "
              f"| {old[0] / GIB:.2f} | {new[0] / GIB:.2f} | {old[1] / GIB:.2f} | {new[1] / GIB:.2f} "
              f"| {peak - old[0] / GIB:+.2f} | {peak - new[0] / GIB:+.2f} | {arena - new[1] / GIB:+.2f} |")


if __name__ == "__main__":
    main()
