"""Mutation benchmark of the schedule explorers: how many mutants of the kernel library each
schedule kills within a budget of seeds, and per CPU-minute (issue 26 item 4).

Each patch in patches/ is one mutant of triton_dist/kernels/ (its header names the op it
breaks and how).  For every mutant and every schedule, seeds 0, 1, ... run a small
workload of that op (3 ranks, 3 calls in a row, so phases and epochs are reused) until
one seed *kills* the mutant: the outputs differ from torch's (float64 reference), or the
launch fails (a deadlock report, an error, the timeout).  The unmutated library runs
first under every schedule and must survive every seed (a kill there would be a false
alarm of the simulator, and the benchmark stops).

    python benchmarks/mutants/run.py [--schedules pct,random,explore,free] [--seeds 20]
                                     [--mutants 04,31] [--timeout 60] [--json out.json] [-j 2]

-j N runs N workers (one mutant each) at a time; the CPU figures do not depend on it.

CPU time is the rusage of the worker process (one per mutant) and of its ranks (children
are counted once reaped) while it runs one schedule's seeds, so the figures hold on a
loaded machine (the worker's start, imports and one warm-up launch are not counted); the
table also gives the first killing seed per mutant.  A mutant no schedule kills is listed as surviving:
it is either equivalent (no execution tells it apart) or a gap of every explorer.  A patch whose
header has an `equivalent: why` line is one shown equivalent by argument; the table counts kills
out of the others and names it apart.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PATCHES = os.path.join(HERE, "patches")
SCHEDULES = ("pct", "random", "aware", "explore", "free")
WORLD = 3
CALLS = 3            # the third call reuses the first call's phase: stale slots show

# the shapes of tests/test_kernels.py's schedule cases (small: many interleavings per second)
CASES = {
    "all_gather": dict(x=(5, 3)),
    "reduce_scatter": dict(rows=2, rest=(3,)),
    "all_reduce_one_shot": dict(x=(5,)),
    "all_reduce_ring": dict(x=(7,)),
    "all_to_all": dict(rows=1, rest=(3,)),
    "ag_gemm": dict(mkn=(3, 5, 4), kw=dict(block_m=2, block_n=4, block_k=8)),
    "gemm_rs": dict(mkn=(3, 5, 4), kw=dict(block_m=2, block_n=4, block_k=8)),
}


# ---- the workload (runs in the ranks and, for the reference, in the worker) --------------------

def _rand(shape, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).float()


def _inputs(op, n, r, call):
    case = CASES[op]
    s = 1000 * call + 10 * r
    if op == "all_gather" or op.startswith("all_reduce"):
        return (_rand(case["x"], s),)
    if op in ("reduce_scatter", "all_to_all"):
        return (_rand((n * case["rows"],) + tuple(case["rest"]), s),)
    m, K, N = case["mkn"]
    if op == "ag_gemm":
        return _rand((m, K), s), _rand((K, N), 1000 * call + 7)
    return _rand((n * m, K), s), _rand((K, N), s + 1)          # gemm_rs


def _reference(op, n, r, call):
    ins = [[a.double() for a in _inputs(op, n, j, call)] for j in range(n)]
    case = CASES[op]
    if op == "all_gather":
        return __import__("torch").cat([i[0] for i in ins])
    if op == "reduce_scatter":
        return sum(i[0] for i in ins)[r * case["rows"]:(r + 1) * case["rows"]]
    if op.startswith("all_reduce"):
        return sum(i[0] for i in ins)
    if op == "all_to_all":
        rows = case["rows"]
        return __import__("torch").cat([i[0][r * rows:(r + 1) * rows] for i in ins])
    if op == "ag_gemm":
        return __import__("torch").cat([i[0] for i in ins]) @ ins[0][1]
    m = case["mkn"][0]
    return sum(i[0] @ i[1] for i in ins)[r * m:(r + 1) * m]   # gemm_rs


def _rank_body(op):
    import triton_dist
    from triton_dist import kernels
    r, n = triton_dist.rank(), triton_dist.world_size()
    outs = []
    for call in range(CALLS):
        args = _inputs(op, n, r, call)
        if op.startswith("all_reduce"):
            outs.append(kernels.all_reduce(*args, method=op.split("_", 2)[2]))
        else:
            outs.append(getattr(kernels, op)(*args, **CASES[op].get("kw", {})))
    return outs


def _wrong(op, values) -> str:
    """'' when every rank's every output matches torch's, else what differs."""
    import torch
    for r, outs in enumerate(values):
        for call, out in enumerate(outs):
            ref = _reference(op, WORLD, r, call)
            if tuple(out.shape) != tuple(ref.shape):
                return f"rank {r} call {call}: shape {tuple(out.shape)}, want {tuple(ref.shape)}"
            if not torch.allclose(out.double(), ref, rtol=1e-4, atol=1e-4 * (WORLD + 1)):
                bad = (out.double() - ref).abs().max().item()
                return f"rank {r} call {call}: off by up to {bad:.3g}"
    return ""


# ---- one (mutant, schedule): a worker process ----------------------------------------------------

def _use_kernels(path):
    """Import the (patched) kernel library at `path` as triton_dist.kernels (ranks fork from here)."""
    import importlib.util
    import triton_dist
    spec = importlib.util.spec_from_file_location("triton_dist.kernels", os.path.join(path, "__init__.py"),
                                                  submodule_search_locations=[path])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["triton_dist.kernels"] = mod
    spec.loader.exec_module(mod)
    triton_dist.kernels = mod


def _cpu_seconds() -> float:
    """CPU time of this process and of its reaped children (the ranks)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def worker(kernels_path, op, schedules, seeds, timeout):
    """For each schedule, seeds 0.. until one kills; prints one JSON line per schedule."""
    _use_kernels(kernels_path)
    import triton_dist
    triton_dist.launch(lambda: None, world_size=WORLD)          # warm-up: imports, first fork
    for schedule in schedules:
        out = {"schedule": schedule, "killed_at": None, "seeds": 0, "why": ""}
        c0, t0 = _cpu_seconds(), time.monotonic()
        for seed in range(seeds):
            out["seeds"] = seed + 1
            try:
                res = triton_dist.launch(_rank_body, op, world_size=WORLD, timeout=timeout,
                                         schedule=schedule, seed=None if schedule == "free" else seed)
                why = _wrong(op, res.values)
            except Exception as e:  # noqa: BLE001 - any failure of the launch kills the mutant
                why = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            if why:
                out["killed_at"], out["why"] = seed, why
                break
        out.update(cpu=_cpu_seconds() - c0, wall=time.monotonic() - t0)
        print("RESULT " + json.dumps(out), flush=True)


def _run_worker(kernels_path, op, schedules, seeds, timeout):
    """{schedule: result} from one worker process (one import of torch and triton for all)."""
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", kernels_path, op,
                        ",".join(schedules), str(seeds), str(timeout)], capture_output=True, text=True)
    got = {}
    for ln in p.stdout.splitlines():
        if ln.startswith("RESULT "):
            r = json.loads(ln[7:])
            got[r.pop("schedule")] = r
    if len(got) != len(schedules):
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise SystemExit(f"worker for {op} printed {len(got)} of {len(schedules)} results (status "
                         f"{p.returncode}): " + " | ".join(tail))
    return got


# ---- mutants ---------------------------------------------------------------------------------------

def mutants(selected=None):
    """[(id, name, op, description, patch path)] in file order."""
    out = []
    for f in sorted(os.listdir(PATCHES)):
        if not f.endswith(".patch"):
            continue
        mid = f.split("_", 1)[0]
        if selected and mid not in selected:
            continue
        with open(os.path.join(PATCHES, f)) as fh:
            head = [next(fh).rstrip("\n") for _ in range(3)]
        out.append((mid, head[0].split(" ", 1)[1], head[1].split(": ", 1)[1], head[2], os.path.join(PATCHES, f)))
    return out


def equivalent(patch) -> str:
    """The reason given in the patch's header why the mutant is equivalent, or ''."""
    with open(patch) as fh:
        for ln in fh:
            if ln.startswith("--- "):
                return ""
            if ln.startswith("equivalent: "):
                return ln.split(": ", 1)[1].strip()
    return ""


def _patched_copy(patch, into):
    """A copy of triton_dist/kernels with `patch` applied (None: the original)."""
    dst = os.path.join(into, "triton_dist", "kernels")
    shutil.copytree(os.path.join(ROOT, "triton_dist", "kernels"), dst,
                    ignore=shutil.ignore_patterns("__pycache__"))
    if patch is not None:
        p = subprocess.run(["patch", "-p1", "-s", "-d", into, "-i", patch], capture_output=True, text=True)
        if p.returncode:
            raise SystemExit(f"{os.path.basename(patch)} does not apply to triton_dist/kernels any more "
                             f"(regenerate it): {p.stdout.strip()} {p.stderr.strip()}")
    return dst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedules", default="pct,random,explore,free")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--mutants", default="", help="comma-separated ids (default: all)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per launch")
    ap.add_argument("--json", help="write every result here")
    ap.add_argument("--skip-baseline", action="store_true", help="do not run the unmutated library first")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="workers run at a time (one mutant each)")
    a = ap.parse_args(argv)
    schedules = [s for s in a.schedules.split(",") if s]
    for s in schedules:
        if s not in SCHEDULES:
            ap.error(f"unknown schedule {s!r}; choose from {', '.join(SCHEDULES)}")
    todo = mutants(set(a.mutants.split(",")) - {""})
    print(f"# {len(todo)} mutants x {', '.join(schedules)}, up to {a.seeds} seeds each; "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs, "
          f"{a.jobs} worker(s) at a time", flush=True)
    results = {"schedules": schedules, "seeds": a.seeds, "baseline": {}, "mutants": []}
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp, \
            concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        # the unmutated library is submitted first (the pool runs in submission order), the
        # mutants fill the other workers meanwhile and are dropped if the library fails
        ops = [] if a.skip_baseline else sorted({m[2] for m in todo})
        original = _patched_copy(None, os.path.join(tmp, "original"))
        base_runs = [pool.submit(_run_worker, original, op, schedules, a.seeds, a.timeout) for op in ops]
        runs = [pool.submit(_run_worker, _patched_copy(patch, os.path.join(tmp, mid)), op, schedules,
                            a.seeds, a.timeout) for mid, name, op, what, patch in todo]
        for op, run in zip(ops, base_runs):
            got = run.result()
            for s in schedules:
                r = got[s]
                results["baseline"][f"{op}/{s}"] = r
                if r["killed_at"] is not None:
                    for later in runs:
                        later.cancel()
                    raise SystemExit(f"the unmutated library fails {op} under {s} seed {r['killed_at']}: "
                                     f"{r['why']} (a false alarm: fix the simulator or the workload first)")
                print(f"baseline {op:20s} {s:8s} survives {r['seeds']} seeds  cpu {r['cpu']:6.1f} s", flush=True)
        for (mid, name, op, what, patch), run in zip(todo, runs):
            row = {"id": mid, "name": name, "op": op, "what": what, "equivalent": equivalent(patch), "by": {}}
            got = run.result()
            for s in schedules:
                r = got[s]
                row["by"][s] = r
                k = "-" if r["killed_at"] is None else str(r["killed_at"])
                print(f"{mid} {name:34s} {s:8s} killed at seed {k:>3s}  cpu {r['cpu']:6.1f} s  {r['why'][:90]}",
                      flush=True)
            results["mutants"].append(row)
    print(f"# done {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.1f}", flush=True)
    print()
    print(table(results))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)


def from_json(path) -> str:
    """The table of a run written with --json (the equivalence notes as the patches say now)."""
    with open(path) as fh:
        results = json.load(fh)
    notes = {m[0]: equivalent(m[4]) for m in mutants()}
    for r in results["mutants"]:
        r["equivalent"] = notes.get(r["id"], "")
    return table(results)


def table(results) -> str:
    """The summary: per schedule, mutants killed (of the non-equivalent ones), CPU minutes
    (every mutant's seeds, equivalent ones included), kills per CPU-minute."""
    rows = results["mutants"]
    live = [r for r in rows if not r.get("equivalent")]
    lines = [f"| schedule | killed (of {len(live)} non-equivalent) | mean / last first killing seed | "
             f"CPU minutes | kills per CPU-minute |", "| --- | --- | --- | --- | --- |"]
    for s in results["schedules"]:
        k = [r["by"][s]["killed_at"] for r in live if r["by"][s]["killed_at"] is not None]
        cpu = sum(r["by"][s]["cpu"] for r in rows) / 60
        mean = f"{sum(k) / len(k):.2f} / {max(k)}" if k else "-"
        lines.append(f"| {s} | {len(k)} | {mean} | {cpu:.1f} | {len(k) / cpu if cpu else 0:.1f} |")
    lines.append("")
    for s in results["schedules"]:
        ids = [r["id"] for r in live if r["by"][s]["killed_at"] is None]
        lines.append(f"survivors of {s} within {results['seeds']} seeds: {', '.join(ids) or 'none'}")
    for r in rows:
        if r.get("equivalent"):
            killed = [s for s in results["schedules"] if r["by"][s]["killed_at"] is not None]
            lines.append(f"equivalent: {r['id']} {r['name']}"
                         + (f" (killed by {', '.join(killed)}: the argument is wrong)" if killed else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--table":       # the table of an earlier --json run
        print(from_json(sys.argv[2]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4].split(","), int(sys.argv[5]), float(sys.argv[6]))
    else:
        main()
