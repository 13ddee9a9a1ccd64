"""The access path's cost per kernel round, this tree against an earlier commit and Triton's
plain interpreter, in one run.

    python benchmarks/bench_access.py --before REV [--repeat N] [--docs]

What is measured: the CPU time (time.thread_time of the core's thread) of one round of each
overhead kernel's loop (benchmarks/micro_kernels.py: the 32x32 block load+store, the same in 4
programs, the scalar flag store+load), taken between two consecutive tl.store calls of a
thread, over hundreds of rounds; the 10th percentile and the median are printed.  A round's
CPU time rather than a launch's wall clock: on the shared 2-core machine (load 20-70) the
wall clock measures the load, and a low percentile of a round's CPU time is the least
disturbed figure there is (bench_all.py's per-launch figures are the other view).

Three kinds of process alternate, `--repeat` times: the plain interpreter (TRITON_INTERPRET=1,
no triton_dist), the simulator of REV (a temporary copy of it, `git archive`, imported ahead
of the installed tree) and the simulator of this tree, each under free, random and pct.
A fourth kind of process runs, inside each rank of the simulator, Triton's own interpreter
and the simulator in turn on the same kernel (same_process): this machine runs one process up
to twice as fast as the next, so only a ratio taken inside one process is steady enough to
judge a target near 1.2x by; the targets are judged on it.
--docs rewrites docs/figures.md's block between `<!-- access:begin -->` and `<!-- access:end -->`.
"""
import argparse
import contextlib
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BEGIN, END = "<!-- access:begin -->", "<!-- access:end -->"
KERNELS = {"block": "32x32 fp32 block load+store, 1 program",
           "block4": "same, 4 programs",
           "scalar": "scalar flag store+load"}
SCHEDULES = ("free", "random", "pct")
ITERS = 300
SAME_PAIRS = 2      # pairs of plain / simulator runs of each kernel per rank in one process
# the targets, as ratios to the plain interpreter: (kernel, schedule) -> limit
TARGETS = {("block", "free"): 1.2, ("block4", "free"): 1.2, ("block", "random"): 2.0, ("block", "pct"): 2.0,
           ("block4", "random"): 2.0, ("block4", "pct"): 2.0, ("scalar", "free"): 2.0}


def rounds(kernel: str, iters: int = ITERS, plain: bool = False) -> list:
    """CPU microseconds of each round of `kernel`'s loop, in whatever mode this process runs;
    plain: Triton's own interpreter inside a rank of the simulator (plain_interpreter())."""
    import torch
    sys.path.insert(0, HERE)
    import micro_kernels as K
    if plain:
        with plain_interpreter():
            from triton.runtime.interpreter import InterpretedFunction as F
            kernels = {name: F(getattr(K, name).fn) for name in
                       ("block_copy_kernel", "block_copy_grid_kernel", "scalar_flag_kernel")}
            return _rounds(kernel, iters, types.SimpleNamespace(**kernels), torch.zeros)
    if "triton_dist" in sys.modules:      # the simulator's store (sim/interp.py installed it on the builder)
        import triton_dist
        alloc = lambda n, dtype=torch.float32: triton_dist.symm_tensor((n,), dtype)  # noqa: E731
    else:
        alloc = torch.zeros
    return _rounds(kernel, iters, K, alloc)


def _rounds(kernel, iters, K, alloc) -> list:
    import threading

    import torch
    marks = {}

    def mark():
        marks.setdefault(threading.get_ident(), []).append(time.thread_time_ns())

    from triton.runtime import interpreter as I
    B = I.InterpreterBuilder
    store, masked_store = B.create_store, B.create_masked_store
    inside = threading.local()      # an unmasked store that calls the masked one counts once

    def counted(*a, **k):
        mark()
        inside.store = True
        try:
            return store(*a, **k)
        finally:
            inside.store = False

    def counted_masked(*a, **k):
        if not getattr(inside, "store", False):
            mark()
        return masked_store(*a, **k)
    B.create_store, B.create_masked_store = counted, counted_masked
    src, dst, flag, gsrc, gdst = alloc(1024), alloc(1024), alloc(16, dtype=torch.int32), alloc(4096), alloc(4096)
    run = {"block": lambda: K.block_copy_kernel[(1,)](src, dst, ITERS=iters, B=32),
           "block4": lambda: K.block_copy_grid_kernel[(4,)](gsrc, gdst, ITERS=iters // 4, B=32),
           "scalar": lambda: K.scalar_flag_kernel[(1,)](flag, ITERS=iters)}[kernel]
    try:
        run()                     # warm: the kernel's first launch
        marks.clear()
        run()
    finally:
        B.create_store, B.create_masked_store = store, masked_store
    return [(b - a) / 1e3 for ts in marks.values() for a, b in zip(ts, ts[1:])]


_PLAIN = []          # [(owner, its attributes as Triton made them)], taken before triton_dist patches them
_GONE = object()


def _snapshot() -> None:
    """Triton's interpreter as Triton made it: called in a child process before it imports
    triton_dist (whose backend patches the interpreter when it is installed)."""
    assert "triton_dist" not in sys.modules
    from triton.language import semantic
    from triton.runtime import interpreter as I
    from triton.runtime import jit
    for owner in (I.InterpreterBuilder, I.GridExecutor, I.InterpretedFunction, jit.JITFunction,
                  semantic.TritonSemantic, I):
        _PLAIN.append((owner, dict(vars(owner))))


@contextlib.contextmanager
def plain_interpreter():
    """Inside a rank of the simulator, for a moment: Triton's interpreter exactly as Triton
    made it (every attribute the simulator replaced or added is put back or taken away), so
    the plain interpreter's rounds and the simulator's alternate in one process: this machine
    runs one process up to twice as fast as the next (docs/figures.md)."""
    changed = []
    for owner, saved in _PLAIN:
        now = dict(vars(owner))
        for name in set(saved) | set(now):
            if now.get(name, _GONE) is not saved.get(name, _GONE):
                changed.append((owner, name, now.get(name, _GONE)))
                if name in saved:
                    setattr(owner, name, saved[name])
                else:
                    delattr(owner, name)
    try:
        yield
    finally:
        for owner, name, v in changed:
            if v is _GONE:
                delattr(owner, name)
            else:
                setattr(owner, name, v)


def same_process(reps: int) -> dict:
    """{schedule: {kernel: {"plain": rounds, "sim": rounds}}}: in each rank, `reps` pairs of
    the plain interpreter's run and the simulator's, alternating."""
    _snapshot()
    import triton_dist

    def body():
        out = {}
        for k in KERNELS:
            rounds(k, plain=True)            # warm: the kernel's first plain run
            for _ in range(reps):
                for kind in ("plain", "sim"):
                    out.setdefault(k, {}).setdefault(kind, []).extend(rounds(k, plain=kind == "plain"))
        return out
    return {s: triton_dist.launch(body, world_size=1, schedule=s, seed=1, timeout=900).values[0] for s in SCHEDULES}


def child(mode: str) -> dict:
    """{kernel: rounds} (plain) or {schedule: {kernel: rounds}} (a simulator)."""
    if mode == "plain":
        return {k: rounds(k) for k in KERNELS}
    if mode == "same":
        return same_process(SAME_PAIRS)
    import triton_dist
    return {s: {k: triton_dist.launch(rounds, k, world_size=1, schedule=s, seed=1, timeout=900).values[0]
                for k in KERNELS} for s in SCHEDULES}


def run_child(mode: str, tree: str | None, nice: int = 0) -> dict:
    env = dict(os.environ)
    if mode == "plain":
        env["TRITON_INTERPRET"] = "1"
    if tree is not None:      # the earlier commit's packages ahead of the installed (editable) ones
        env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    code = f"import json, sys; sys.path.insert(0, {HERE!r}); import bench_access as b; " \
           f"print('RESULT', json.dumps(b.child({mode!r})))"
    pre = ["nice", "-n", str(nice)] if nice else []
    p = subprocess.run(pre + [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tree or ROOT)
    if p.returncode:
        raise SystemExit(f"{mode} ({tree or 'this tree'}) failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.rsplit("RESULT", 1)[1])


def checkout(rev: str) -> str:
    """A temporary copy of `rev` importable as triton_dist (its sim/, backend_* folders
    linked where the package-dir mapping of pyproject.toml puts them)."""
    path = tempfile.mkdtemp(prefix="bench_access_")
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", path], input=archive, check=True)
    for sub in ("sim", "backend_ascend", "backend_cuda"):
        if os.path.isdir(os.path.join(path, sub)):
            os.symlink(os.path.join(path, sub), os.path.join(path, "triton_dist", sub))
    return path


def git(*args) -> str:
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True).stdout.strip()


def p10(xs):
    xs = sorted(xs)
    return xs[len(xs) // 10]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the earlier commit to compare with (e.g. main~3)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--docs", "--readme", dest="readme", action="store_true",
                    help="rewrite docs/figures.md's access-path table from this run")
    ap.add_argument("--nice", type=int, default=0,
                    help="run the measured processes at this niceness (negative: preempted less by a loaded "
                         "machine's other work, which pollutes their caches; needs the privilege)")
    a = ap.parse_args()
    before_rev = git("rev-parse", "--short", a.before)
    after_rev = git("rev-parse", "--short", "HEAD") + (" with uncommitted changes" if git(
        "status", "--porcelain", "--untracked-files=no") else "")
    started, load0 = datetime.datetime.now(datetime.timezone.utc), os.getloadavg()
    tree = checkout(a.before)
    plain = {k: [] for k in KERNELS}
    sims = {v: {s: {k: [] for k in KERNELS} for s in SCHEDULES} for v in ("before", "after")}
    same = {s: {k: {"plain": [], "sim": []} for k in KERNELS} for s in SCHEDULES}
    try:
        for i in range(a.repeat):
            for k, xs in run_child("plain", None, a.nice).items():
                plain[k] += xs
            for v, t in (("before", tree), ("after", None)):
                for s, per in run_child("sim", t, a.nice).items():
                    for k, xs in per.items():
                        sims[v][s][k] += xs
            for s, per in run_child("same", None, a.nice).items():
                for k, both in per.items():
                    for kind, xs in both.items():
                        same[s][k][kind] += xs
            print(f"round {i + 1}/{a.repeat} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    load1 = os.getloadavg()
    rows = ["| kernel round | schedule | before: p10 / median us | ratio | after: p10 / median us | ratio "
            "| after, in one process: plain / simulator p10 us | ratio | target (in one process) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k, label in KERNELS.items():
        ref = p10(plain[k])
        rows.append(f"| {label} | plain interpreter | {ref:.1f} / {statistics.median(plain[k]):.1f} | | "
                    f"{ref:.1f} / {statistics.median(plain[k]):.1f} | | | | |")
        for s in SCHEDULES:
            cells = []
            for v in ("before", "after"):
                xs = sims[v][s][k]
                cells.append(f"{p10(xs):.1f} / {statistics.median(xs):.1f} | {p10(xs) / ref:.2f}x")
            one = same[s][k]
            r1 = p10(one["sim"]) / p10(one["plain"])
            cells.append(f"{p10(one['plain']):.1f} / {p10(one['sim']):.1f} | {r1:.2f}x")
            lim = TARGETS.get((k, s))
            met = "" if lim is None else f"<= {lim:g}x: {'met' if r1 <= lim else 'NOT met'}"
            rows.append(f"| | {s} / ascend | {cells[0]} | {cells[1]} | {cells[2]} | {met} |")
    n = min(len(x) for x in plain.values())
    cmd = " ".join(["python benchmarks/bench_access.py"] + sys.argv[1:])
    text = (f"Generated by `{cmd}` on "
            f"{started:%Y-%m-%d %H:%M} UTC: before = {before_rev}, after = {after_rev}; load average "
            f"{load0[0]:.1f} / {load0[1]:.1f} / {load0[2]:.1f} at the start, {load1[0]:.1f} / {load1[1]:.1f} / "
            f"{load1[2]:.1f} at the end ({os.cpu_count()} cores){f'; measured processes at nice {a.nice}' if a.nice else ''}.  CPU time of one round of each kernel's loop "
            f"(thread time between two tl.store calls of a core, at least {n} rounds per figure, the three kinds "
            f"of process alternating); ratios are 10th percentile over the plain interpreter's 10th percentile.  "
            f"In one process: inside each rank of the simulator, Triton's own interpreter (every attribute the "
            f"simulator replaced put back for the moment, plain_interpreter()) and the simulator run the kernel "
            f"in turn, {SAME_PAIRS} pairs per process, so the machine's process-to-process swings cancel; the "
            f"targets are judged on that ratio.\n\n"
            + "\n".join(rows))
    print(text)
    if a.readme:
        from bench_all import write_readme
        write_readme(text, BEGIN, END)
        print("docs/figures.md: access-path table rewritten")


if __name__ == "__main__":
    main()
