#!/usr/bin/env python3
"""Loss parity of `sextant run --format json` runs, for the device check scripts
(four-rank layouts against one GPU; a resumed run against the run that saved it).

  loss_parity.py parity OUT REFERENCE=RUN,RUN... [REFERENCE=RUN,...]... [--skip-absent]
      Each RUN's losses against its REFERENCE's (names of OUT/<name>.json, the last JSON
      line of each), one table: the relative difference at step 1 (the same forward of the same weights:
      ok within 1e-5) and at the last step (the sums' order: ok within 1e-2). A RUN with no
      JSON prints "missing", or nothing with --skip-absent.
  loss_parity.py resume OUT SAVED RUN...
      Each RUN resumed from SAVED's step-3 checkpoint (2 steps) against SAVED's steps 4-5
      (5 steps): ok within 1e-3 (the same weights and data, sums in another grouping).
"""
import json
import pathlib
import sys


def losses(out, name):
    try:
        return json.loads((out / f"{name}.json").read_text().strip().splitlines()[-1])["loss"]
    except Exception:
        return None


def parity(out, groups, skip_absent):
    print(f"{'run':36s} {'step 1 rel':>11s} {'step 20 rel':>11s}  verdict")
    for group in groups:
        reference, _, names = group.partition("=")
        compare(out, losses(out, reference), names.split(","), skip_absent)


def compare(out, want, runs, skip_absent):
    for name in runs:
        if skip_absent and not (out / f"{name}.json").exists():
            continue
        got = losses(out, name)
        if want is None or got is None or len(got) != len(want):
            print(f"{name:36s} missing")
            continue
        first = abs(got[0] - want[0]) / abs(want[0])
        last = abs(got[-1] - want[-1]) / abs(want[-1])
        ok = first <= 1e-5 and last <= 1e-2
        print(f"{name:36s} {first:11.2e} {last:11.2e}  {'ok' if ok else 'FAIL'}")


def resume(out, saved_name, runs):
    saved = losses(out, saved_name)
    for name in runs:
        got = losses(out, name)
        if saved is None or got is None or len(got) != 2 or len(saved) != 5:
            print(f"{name}: failed ({got})")
            continue
        e = [abs(got[i] - saved[3 + i]) / saved[3 + i] for i in range(2)]
        print(f"{name}: step 4 {got[0]:.6f} vs {saved[3]:.6f} ({e[0]:.1e}), step 5 {got[1]:.6f} vs {saved[4]:.6f} "
              f"({e[1]:.1e}) {'ok' if max(e) <= 1e-3 else 'FAIL'}")


def main(argv):
    skip_absent = "--skip-absent" in argv
    args = [a for a in argv if a != "--skip-absent"]
    if len(args) < 3 or args[0] not in ("parity", "resume"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, out = args[0], pathlib.Path(args[1])
    if mode == "parity":
        parity(out, args[2:], skip_absent)
    else:
        resume(out, args[2], args[3:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
