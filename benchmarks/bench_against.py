"""The overhead kernels of bench_all.py on this tree and on another commit, in one run.

    python benchmarks/bench_against.py --base main [--repeat 5] [--schedule free] [--memory-model ascend]

`git archive BASE` is unpacked in a temporary directory; each round runs bench_all's
overhead kernels (block load+store, the block loop on 4 programs, scalar flag, dot) once in
a fresh process on the base and once on this tree, alternating, so both see the same load.
The base runs through this venv's editable-install finder pointed at the unpacked tree
(its package-dir mapping: triton_dist, triton_dist.sim, ...), so nothing is installed.
Prints the median and minimum per round of each kernel, wall clock and CPU time, and the
ratio this tree / base.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

RUN = r'''
import json, os, sys
base = %(base)r
if base:
    import importlib
    finder = next(m for n, m in sys.modules.items() if n.startswith("__editable__") and n.endswith("finder"))
    for k, v in list(finder.MAPPING.items()):
        finder.MAPPING[k] = v.replace(%(root)r, base, 1)
    sys.path.insert(0, os.path.join(base, "benchmarks")); sys.path.insert(0, os.path.join(base, "tests"))
else:
    sys.path.insert(0, %(here)r); sys.path.insert(0, os.path.join(%(root)r, "tests"))
import triton_dist, bench_all
assert os.path.dirname(triton_dist.__file__).startswith(base or %(root)r), triton_dist.__file__
got = triton_dist.launch(bench_all.overhead_kernels, 2, world_size=1, schedule=%(schedule)r, seed=1,
                         memory_model=%(model)r).values[0]
print("RESULT " + json.dumps(got))
'''


def _round(base: str, schedule: str, model: str) -> dict:
    code = RUN % {"base": base, "root": ROOT, "here": HERE, "schedule": schedule, "model": model}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=base or ROOT)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"a round failed ({'base' if base else 'this tree'}):\n{out.stdout}\n{out.stderr}")
    return json.loads(line[7:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="the commit to compare with (default main)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of each (default 5)")
    ap.add_argument("--schedule", default="free")
    ap.add_argument("--memory-model", default="ascend")
    a = ap.parse_args()
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", a.base], capture_output=True, text=True,
                         check=True).stdout.strip()
    here = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="triton_dist-base-") as tmp:
        archive = os.path.join(tmp, "base.tar")
        subprocess.run(["git", "-C", ROOT, "archive", "-o", archive, rev], check=True)
        base = os.path.join(tmp, "tree")
        with tarfile.open(archive) as t:
            t.extractall(base)
        xs = {"base": {}, "tree": {}}
        for _ in range(a.repeat):
            for who, path in (("base", base), ("tree", "")):
                for k, v in _round(path, a.schedule, a.memory_model).items():
                    xs[who].setdefault(k, []).extend(v)
    load1 = os.getloadavg()
    print(f"{a.schedule}/{a.memory_model}, {a.repeat} alternating rounds: base {a.base} ({rev}) vs this tree "
          f"(HEAD {here} + working tree); load average {load0[0]:.1f} -> {load1[0]:.1f}")
    print(f"{'kernel (us per iteration)':34s} {'base median':>12s} {'tree median':>12s} {'ratio':>6s} "
          f"{'base min':>10s} {'tree min':>10s} {'ratio':>6s}")
    for k in xs["base"]:
        b, t = xs["base"][k], xs["tree"].get(k, [])
        if not t:
            continue
        bm, tm = statistics.median(b) * 1e6, statistics.median(t) * 1e6
        bn, tn = min(b) * 1e6, min(t) * 1e6
        print(f"{k:34s} {bm:12.1f} {tm:12.1f} {tm / bm:6.2f} {bn:10.1f} {tn:10.1f} {tn / bn:6.2f}")


if __name__ == "__main__":
    main()
