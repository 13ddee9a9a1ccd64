"""All simulator figures in one run, one table: start-up, overhead, scheduler, scaling, suite.

    python benchmarks/bench_all.py [--repeat N] [--only SECTION ...] [--suite] [--json OUT]
    python benchmarks/bench_all.py --docs          # every section + the suite, then docs/figures.md

Every figure is measured N times in this run on this machine; min and median are printed.
The plain-interpreter baseline runs in a child process that imports only triton
(TRITON_INTERPRET=1), since importing triton_dist patches the interpreter in-process; its
rounds alternate with the simulator's, so both see the same load on a shared machine.
The output format is stable (fixed columns, fixed row names) so two runs can be diffed.

--docs rewrites the table of docs/figures.md (between its
`<!-- figures:begin -->` / `<!-- figures:end -->` markers) from this run: the date, the
commit, the machine, the load average before and after, every figure, the test counts
and step counts, and which targets are met.  Nothing in it is typed by hand.
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

ITERS = 100          # rounds per overhead kernel
GRID_PROGRAMS, GRID_ITERS = 4, 16   # the block loop in several programs (each on its own tile)
SECTIONS = ("start-up", "overhead", "scheduler", "scaling", "suite")
SCHEDULES = [("free", "ascend"), ("free", "coherent"), ("random", "ascend"), ("random", "coherent"),
             ("pct", "ascend"), ("pct", "coherent")]
EXPLORE_SCRIPT = os.path.join(ROOT, "examples", "hello_allgather.py")
README = os.path.join(ROOT, "docs", "figures.md")   # the page that holds the figures table
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"


# ---- what is measured -------------------------------------------------------------------------

def overhead_kernels(repeat):
    """Seconds per round of the overhead kernels, in whatever mode this process runs."""
    import torch
    import micro_kernels as K
    if "triton_dist" in sys.modules:
        import triton_dist
        alloc = lambda n: triton_dist.symm_tensor((n,), torch.float32)  # noqa: E731
        flag = triton_dist.symm_tensor((16,), torch.int32)
    else:
        alloc = lambda n: torch.zeros(n)  # noqa: E731
        flag = torch.zeros(16, dtype=torch.int32)
    a, b, c = alloc(64 * 64), alloc(64 * 64), alloc(64 * 64)
    src, dst = alloc(32 * 32), alloc(32 * 32)
    gsrc, gdst = alloc(GRID_PROGRAMS * 32 * 32), alloc(GRID_PROGRAMS * 32 * 32)
    runs = {"block": (lambda: K.block_copy_kernel[(1,)](src, dst, ITERS=ITERS, B=32), ITERS),
            "block4": (lambda: K.block_copy_grid_kernel[(GRID_PROGRAMS,)](gsrc, gdst, ITERS=GRID_ITERS, B=32),
                       GRID_ITERS * GRID_PROGRAMS),
            "scalar": (lambda: K.scalar_flag_kernel[(1,)](flag, ITERS=ITERS), ITERS),
            "dot": (lambda: K.dot_kernel[(1,)](a, b, c, ITERS=ITERS // 10, B=64), ITERS // 10)}
    K.block_copy_kernel[(1,)](src, dst, ITERS=2, B=32)
    K.block_copy_grid_kernel[(GRID_PROGRAMS,)](gsrc, gdst, ITERS=2, B=32)
    out = {}
    for _ in range(repeat):
        for name, (run, rounds) in runs.items():
            # wall time, and the CPU time of the whole process (every core thread): on a loaded
            # machine the wall clock measures the load, the CPU time the work
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            out.setdefault(name, []).append((time.perf_counter() - wall) / rounds)
            out.setdefault(name + ":cpu", []).append((time.process_time() - cpu) / rounds)
    return out


def plain_interpreter(repeat):
    code = ("import json,sys; sys.path.insert(0, %r); import bench_all as b; "
            "print(json.dumps(b.overhead_kernels(%d)))" % (HERE, repeat))
    env = dict(os.environ, TRITON_INTERPRET="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def scheduler_alone(n):
    import triton_dist
    sched = triton_dist._backend.active().rt.sched
    triton_dist.barrier()
    s0, w0, t = sched.sh.steps(), sched.sh.switches(), time.perf_counter()
    for _ in range(n):
        sched.point("bench")
    triton_dist.barrier()
    return sched.sh.steps() - s0, sched.sh.switches() - w0, time.perf_counter() - t


def scaling_body(op, rows):
    """Wall seconds of one call of the op at a fixed per-rank size (timed inside the ranks)."""
    import torch
    import triton_dist
    from triton_dist import kernels
    g = torch.Generator().manual_seed(triton_dist.rank())
    if op == "all_reduce ring":
        x = torch.randn(rows, 64, generator=g)
        kernels.all_reduce(x, method="ring")          # warm: workspaces allocated
        triton_dist.barrier()
        t = time.perf_counter()
        kernels.all_reduce(x, method="ring")
    else:
        a = torch.randn(rows, 32, generator=g)
        b = torch.randn(32, 32, generator=torch.Generator().manual_seed(99))
        kernels.ag_gemm(a, b)
        triton_dist.barrier()
        t = time.perf_counter()
        kernels.ag_gemm(a, b)
    triton_dist.barrier()
    return time.perf_counter() - t


def ping_pong_steps():
    """(steps, switches, seconds) of a 200-round signal ping-pong kernel, timed inside the ranks."""
    import torch
    import triton_dist
    import test_primitives as P
    ping = triton_dist.symm_tensor((16,), torch.int32)
    pong = triton_dist.symm_tensor((16,), torch.int32)
    log = torch.zeros(200, dtype=torch.int32)
    sh = triton_dist._backend.active().rt.sched.sh
    triton_dist.barrier()
    s0, w0, t = sh.steps(), sh.switches(), time.perf_counter()
    P.ping_pong_kernel[(1,)](ping, pong, log, ROUNDS=200)
    return sh.steps() - s0, sh.switches() - w0, time.perf_counter() - t


# ---- the table --------------------------------------------------------------------------------

class Table:
    """Prints each figure as it is measured and keeps it (rows) for --json and --readme."""
    SCALE = {"us": 1e6, "ms": 1e3, "s": 1.0, "/s": 1.0, "": 1.0}

    def __init__(self):
        self.rows = {}
        print(f"{'figure':64s} {'min':>12s} {'median':>12s} {'ratio':>18s}")

    def row(self, key, name, xs, unit, fmt="{:10.1f}", ratio=None, min_ratio=None, note=""):
        mn, md = min(xs) * self.SCALE[unit], statistics.median(xs) * self.SCALE[unit]
        self.rows[key] = dict(name=name, min=mn, median=md, unit=unit, fmt=fmt, n=len(xs), ratio=ratio,
                              xs=[x * self.SCALE[unit] for x in xs],
                              min_ratio=min_ratio, note=note)
        r = "" if ratio is None else f"{ratio:.2f}x" + ("" if min_ratio is None else f" (min {min_ratio:.2f}x)")
        print(f"{name:64s} {fmt.format(mn)}{unit:>2s} {fmt.format(md)}{unit:>2s} {r:>18s} {note}", flush=True)

    def get(self, key, field="median"):
        return self.rows[key][field] if key in self.rows else None


def startup(t, a):
    import triton_dist
    imp = []
    for _ in range(3):
        s = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import triton_dist"], check=True)
        imp.append(time.perf_counter() - s)
    t.row("import", "start-up: import triton_dist (fresh process)", imp, "s", "{:10.3f}")
    triton_dist.launch(lambda: None, world_size=4)
    launches = []
    for _ in range(a.repeat):
        s = time.perf_counter()
        triton_dist.launch(lambda: None, world_size=4)
        launches.append(time.perf_counter() - s)
    t.row("launch4", "start-up: launch(world_size=4), empty body", launches, "ms")
    cold_launch = []
    for _ in range(3):          # a script that never imported torch: launch() warms the ranks first
        s = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import triton_dist; triton_dist.launch(lambda: None, world_size=2)"],
                       check=True)
        cold_launch.append(time.perf_counter() - s)
    t.row("cold_launch", "start-up: fresh process: import triton_dist, launch(world_size=2)", cold_launch, "s",
          "{:10.3f}")
    explore_cli(t, a)


def _explore_argv(seeds):
    return ["explore", "-n", "2", EXPLORE_SCRIPT, "--seeds", str(seeds), "--schedule", "pct"]


def _cli(argv):
    exe = os.path.join(os.path.dirname(sys.executable), "triton-dist")      # the installed command
    return ([exe] if os.path.exists(exe) else [sys.executable, "-m", "triton_dist.cli"]) + argv


def _children_cpu() -> float:
    """CPU seconds of this process's waited-for children and theirs (a CLI and its ranks)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# the warm process: imports torch and triton_dist itself (timed apart), then runs the CLI in-process
_WARM = """
import resource, sys, time
def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
t, c = time.perf_counter(), cpu()
import torch, triton_dist, triton_dist.kernels, triton_dist.sim.cli
from triton_dist import cli
imp, imp_cpu = time.perf_counter() - t, cpu() - c
t, c = time.perf_counter(), cpu()
cli.main(%r)
print("FIGURES", time.perf_counter() - t, cpu() - c, imp, imp_cpu)
"""


def explore_cli(t, a, seeds=10, many=200):
    """`triton-dist explore -n 2 hello_allgather.py --seeds 10 --schedule pct` from a fresh process,
    against the same exploration from a process that imported torch and triton_dist first (its
    imports timed apart); then `--seeds 200` from a fresh process.  Wall clock and CPU time (the
    command's process and its ranks)."""
    argv = _explore_argv(seeds)
    warm = [sys.executable, "-c", _WARM % (argv,)]
    cold_s, cold_cpu, warm_s, warm_cpu, imp_s, imp_cpu = [], [], [], [], [], []
    for _ in range(max(1, a.repeat // 2)):       # interleaved: both see the same load
        s, c = time.perf_counter(), _children_cpu()
        subprocess.run(_cli(argv), check=True, capture_output=True)
        cold_s.append(time.perf_counter() - s)
        cold_cpu.append(_children_cpu() - c)
        p = subprocess.run(warm, check=True, capture_output=True, text=True)
        w, wc, i, ic = map(float, p.stdout.rsplit("FIGURES", 1)[1].split())
        warm_s.append(w)
        warm_cpu.append(wc)
        imp_s.append(i)
        imp_cpu.append(ic)
    med = statistics.median
    t.row("explore_warm", f"start-up: explore -n 2 hello_allgather --seeds {seeds} pct, warm process", warm_s, "s",
          "{:10.2f}")
    t.row("explore_warm:cpu", "start-up: same, CPU time", warm_cpu, "s", "{:10.2f}")
    t.row("explore_imports", "start-up: the warm process's own imports before it (torch, triton_dist)", imp_s,
          "s", "{:10.2f}")
    t.row("explore_imports:cpu", "start-up: same, CPU time", imp_cpu, "s", "{:10.2f}")
    t.row("explore_cold", "start-up: same exploration, `triton-dist explore` from a fresh process", cold_s, "s",
          "{:10.2f}", ratio=med(cold_s) / med(warm_s), min_ratio=min(cold_s) / min(warm_s))
    t.row("explore_cold:cpu", "start-up: same, CPU time", cold_cpu, "s", "{:10.2f}",
          ratio=med(cold_cpu) / med(warm_cpu), min_ratio=min(cold_cpu) / min(warm_cpu))
    # what the fresh command pays beyond the warm process is its own imports: against the warm
    # process's imports + exploration it is the same work
    both = [x + y for x, y in zip(warm_cpu, imp_cpu)]
    t.row("explore_cold_vs_all:cpu", "start-up: fresh command against warm imports + exploration, CPU time",
          cold_cpu, "s", "{:10.2f}", ratio=med(cold_cpu) / med(both), min_ratio=min(cold_cpu) / min(both))
    s, c = time.perf_counter(), _children_cpu()
    p = subprocess.run(_cli(_explore_argv(many)), capture_output=True, text=True)
    dt, cpu = time.perf_counter() - s, _children_cpu() - c
    m = re.search(r"(\d+) passed, (\d+) failed", p.stdout)
    note = f"({m.group(1)} passed, {m.group(2)} failed)" if m else "(no summary)"
    t.row("explore_many", f"start-up: `triton-dist explore` --seeds {many}, fresh process", [dt], "s", "{:10.1f}",
          note=note)
    t.row("explore_many:cpu", "start-up: same, CPU time", [cpu], "s", "{:10.1f}", note=note)


def overhead(t, a):
    """The plain interpreter's rounds and the simulator's, alternating (a.repeat rounds of 2)."""
    import triton_dist
    names = {"block": "32x32 fp32 block load+store", "block4": f"same, {GRID_PROGRAMS} programs x {GRID_ITERS} rounds",
             "scalar": "scalar flag store+load", "dot": "64x64x64 fp32 dot"}
    keys = [k + clock for k in names for clock in ("", ":cpu")]
    base = {k: [] for k in keys}
    sim = {s: {k: [] for k in keys} for s in SCHEDULES}
    for _ in range(a.repeat):
        for k, xs in plain_interpreter(2).items():
            base[k] += xs
        for sched, model in SCHEDULES:
            got = triton_dist.launch(overhead_kernels, 2, world_size=1, schedule=sched, seed=1,
                                     memory_model=model).values[0]
            for k, xs in got.items():
                sim[(sched, model)][k] += xs
    for k, label in names.items():
        for clock, suffix in (("", ""), (":cpu", ", CPU time")):
            ref, ref_min = statistics.median(base[k + clock]), min(base[k + clock])
            t.row(f"{k}{clock}/plain", f"overhead: {label}, plain interpreter{suffix}", base[k + clock], "us")
            for sched, model in SCHEDULES:
                xs = sim[(sched, model)][k + clock]
                t.row(f"{k}{clock}/{sched}/{model}", f"overhead: {label}, {sched}/{model}{suffix}", xs, "us",
                      ratio=statistics.median(xs) / ref, min_ratio=min(xs) / ref_min)


def scheduler(t, a):
    import triton_dist
    for sched in ("random", "pct"):
        rates, sw = [], []
        for seed in range(a.repeat):
            st, n_sw, dt = triton_dist.launch(scheduler_alone, 5000, world_size=2, schedule=sched,
                                              seed=seed).values[0]
            rates.append(st / dt)
            sw.append(n_sw / dt)
        t.row(f"steps/{sched}", f"scheduler: steps/s, {sched}, 2 ranks", rates, "/s", "{:10.0f}")
        t.row(f"switches/{sched}", f"scheduler: rank switches/s, {sched}, 2 ranks", sw, "/s", "{:10.0f}")
        kern = [triton_dist.launch(ping_pong_steps, world_size=2, schedule=sched, seed=s).values[0]
                for s in range(a.repeat)]
        t.row(f"pingpong/{sched}", f"scheduler: steps/s in a ping-pong kernel, {sched}, 2 ranks",
              [st / dt for st, _, dt in kern], "/s", "{:10.0f}")


def scaling(t, a):
    """On this machine's cores; ranks beyond them share CPUs."""
    import triton_dist
    for op, rows in (("all_reduce ring", 64), ("ag_gemm", 32)):
        for n in (1, 2, 4, 8):
            wall = [max(triton_dist.launch(scaling_body, op, rows, world_size=n).values)
                    for _ in range(max(1, a.repeat // 2))]
            steps = [triton_dist.launch(scaling_body, op, rows, world_size=n, schedule="pct", seed=0).steps]
            t.row(f"scale/{op}/{n}", f"scaling: {op}, {rows} rows/rank, {n} ranks, wall", wall, "ms")
            t.row(f"steps/{op}/{n}", f"scaling: {op}, {rows} rows/rank, {n} ranks, pct steps (whole run)",
                  steps, "", "{:10.0f}")


def suite(t, a=None):
    load0 = os.getloadavg()
    s = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "pytest", "-n", "auto", "-q", "-p", "no:cacheprovider"],
                       cwd=ROOT, capture_output=True, text=True)
    dt = time.perf_counter() - s
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "?"
    counts = dict((k, int(v)) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", last))
    t.row("suite", "suite: pytest -n auto", [dt], "s", "{:10.1f}", note=f"({last.strip('= ')})")
    t.rows["suite"]["counts"] = counts
    t.rows["suite"]["load"] = [load0, os.getloadavg()]
    for line in p.stdout.splitlines():          # what failed, if anything
        if line.startswith(("FAILED", "ERROR")):
            print("  " + line)


# ---- docs/figures.md figures ------------------------------------------------------------------------

def machine() -> str:
    import torch
    import triton
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, triton {triton.__version__}, "
            f"torch {torch.__version__}, {platform.machine()}")


def commit() -> str:
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + (" with uncommitted changes" if dirty else "")


def _cell(t, key, field="median"):
    r = t.rows.get(key)
    if r is None:
        return "-"
    v = r[field]
    return (r["fmt"].format(v).strip() + " " + r["unit"]).strip()


def _ratio(t, key):
    r = t.rows.get(key)
    if r is None or r["ratio"] is None:
        return ""
    out = f"{r['ratio']:.2f}x (min {r['min_ratio']:.2f}x)"
    cpu = t.rows.get(key.replace("/", ":cpu/", 1))      # the same kernel's CPU-time row
    if "/" in key and cpu is not None and cpu["ratio"] is not None:
        out += f"; CPU time {cpu['ratio']:.2f}x (min {cpu['min_ratio']:.2f}x)"
    return out


def readme_table(t, started, load0, load1, head, merged=()) -> str:
    """The generated part of docs/figures.md."""
    rows = []

    def add(label, key, ratio_key=None, note=""):
        if key in t.rows:
            rows.append(f"| {label} | {_cell(t, key, 'min')} | {_cell(t, key)} | {_ratio(t, ratio_key or key)}"
                        f"{(' ' + note) if note else ''} |")

    add("import triton_dist (fresh process)", "import")
    add("`launch(world_size=4)`, empty body", "launch4")
    add("fresh process: import triton_dist + `launch(world_size=2)`", "cold_launch")
    add("`explore -n 2 hello_allgather.py --seeds 10 --schedule pct`, warm process", "explore_warm")
    add("same, CPU time", "explore_warm:cpu")
    add("the warm process's own imports before it (torch, triton_dist), CPU time", "explore_imports:cpu")
    add("same exploration, `triton-dist explore` from a fresh process", "explore_cold", note="of the warm process")
    add("same, CPU time", "explore_cold:cpu", note="of the warm process's exploration")
    add("same, CPU time", "explore_cold_vs_all:cpu", note="of the warm process's imports + exploration")
    if "explore_many" in t.rows:
        add("`triton-dist explore ... --seeds 200`, fresh process", "explore_many",
            note=t.rows["explore_many"]["note"])
        add("same, CPU time", "explore_many:cpu")
    labels = {"block": "32x32 fp32 block load+store", "block4": f"block loop, {GRID_PROGRAMS} programs x {GRID_ITERS} rounds",
              "scalar": "scalar flag store+load", "dot": "64x64x64 fp32 dot"}
    for k, label in labels.items():
        add(f"{label}, plain interpreter (per round; CPU time {_cell(t, f'{k}:cpu/plain')})", f"{k}/plain")
        for sched in ("free", "random", "pct"):
            add(f"same, simulator {sched} / ascend", f"{k}/{sched}/ascend")
    for sched in ("random", "pct"):
        add(f"scheduler alone, steps/s, {sched}, 2 ranks", f"steps/{sched}",
            note=f"({_cell(t, f'switches/{sched}')} rank switches)" if f"switches/{sched}" in t.rows else "")
        add(f"steps/s inside a signal ping-pong kernel, {sched}", f"pingpong/{sched}")
    for op, label in (("all_reduce ring", "ring AllReduce 64x64 fp32 per rank"), ("ag_gemm", "AG+GEMM 32x32 per rank")):
        if f"scale/{op}/1" in t.rows:
            walls = " / ".join(f"{t.rows[f'scale/{op}/{n}']['median']:.0f}" for n in (1, 2, 4, 8))
            steps = " / ".join(f"{t.rows[f'steps/{op}/{n}']['median']:.0f}" for n in (1, 2, 4, 8))
            rows.append(f"| {label}, 1 / 2 / 4 / 8 ranks | | {walls} ms | pct steps {steps} |")
    if "suite" in t.rows:
        c = t.rows["suite"]["counts"]
        load = t.rows["suite"].get("load")
        during = f" (load average {load[0][0]:.1f} at its start, {load[1][0]:.1f} at its end)" if load else ""
        rows.append(f"| whole test suite, `pytest -n auto` ({os.cpu_count()} workers){during} | | {_cell(t, 'suite')} | "
                    + ", ".join(f"{v} {k}" for k, v in c.items()) + " |")
    cmd = " ".join(["python benchmarks/bench_all.py"] + sys.argv[1:])
    head = (f"Generated by `{cmd}` on {started:%Y-%m-%d %H:%M} UTC "
            f"at commit {head}, on {machine()}; load average (1/5/15 min) "
            f"{load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f} at the start, {load1[0]:.2f} / {load1[1]:.2f} / "
            f"{load1[2]:.2f} at the end.  Every figure is repeated in this run (min / median); the plain-interpreter "
            f"baseline runs the same kernels in a child process with `TRITON_INTERPRET=1` and no triton_dist, its "
            f"rounds alternating with the simulator's; ratios are median / median (min / min in brackets), of the "
            f"wall clock and of the process's CPU time (all its threads).  On a loaded machine the wall clock "
            f"measures the load as much as the work, so the targets are judged on CPU time."
            + "".join(f"  Merged: {m}." for m in merged))
    table = "| figure | min | median | ratio |\n| --- | --- | --- | --- |\n" + "\n".join(rows)
    return head + "\n\n" + table + "\n\n" + targets(t)


def targets(t) -> str:
    """Each target of the figures, met or not, from this run's numbers."""
    out = []

    def check(what, value, limit, shown, le=True):
        if value is None:
            return
        ok = value <= limit if le else value >= limit
        out.append(f"{what}: {shown} ({'met' if ok else 'NOT met'})")

    def ratio(key, limit, what):
        cpu, wall = t.get(key.replace("/", ":cpu/", 1), "ratio"), t.get(key, "ratio")
        check(what, cpu, limit, f"CPU time {cpu or 0:.2f}x, wall {wall or 0:.2f}x")

    for k, label in (("block", "block loop"), ("block4", f"block loop on {GRID_PROGRAMS} programs")):
        ratio(f"{k}/free/ascend", 1.2, f"free <= 1.2x on the {label}")
        for sched in ("random", "pct"):
            ratio(f"{k}/{sched}/ascend", 2.0, f"{sched} <= 2x on the {label}")
    ratio("scalar/free/ascend", 2.0, "the scalar flag loop <= 2x under free")
    check("`triton-dist explore` from a fresh process within 1.3x of a warm process's exploration",
          t.get("explore_cold:cpu", "ratio"), 1.3,
          f"CPU time {t.get('explore_cold:cpu', 'ratio') or 0:.2f}x, wall {t.get('explore_cold', 'ratio') or 0:.2f}x; "
          f"{t.get('explore_cold_vs_all:cpu', 'ratio') or 0:.2f}x of its imports + exploration (the fresh command "
          f"imports torch and triton_dist once, {t.get('explore_imports:cpu') or 0:.1f} s CPU)")
    # a minute of the user's time: the wall clock (its CPU time is shown beside it)
    check("200 seeds of a 2-rank script in under a minute", t.get("explore_many"), 60.0,
          f"wall {t.get('explore_many') or 0:.0f} s, CPU time {t.get('explore_many:cpu') or 0:.0f} s")
    for sched in ("random", "pct"):
        check(f">= 20,000 scheduler steps/s ({sched})", t.get(f"steps/{sched}"), 20000,
              f"{(t.get(f'steps/{sched}') or 0) / 1000:.1f} k", le=False)
    return "Targets: " + "; ".join(out) + "." if out else ""


def write_readme(text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace what docs/figures.md holds between the markers `begin` and `end` with `text`."""
    with open(README) as f:
        doc = f.read()
    if begin not in doc or end not in doc:
        raise SystemExit(f"docs/figures.md has no {begin} ... {end} block")
    pre, rest = doc.split(begin, 1)
    _, post = rest.split(end, 1)
    with open(README, "w") as f:
        f.write(pre + begin + "\n" + text + "\n" + end + post)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--suite", action="store_true", help="also time the whole test suite (pytest -n auto)")
    ap.add_argument("--only", choices=SECTIONS, action="append",
                    help="run only this section (repeatable); default: all of them")
    ap.add_argument("--json", metavar="OUT", help="also write every figure to this JSON file")
    ap.add_argument("--docs", "--readme", dest="readme", action="store_true",
                    help="every section (or those of --only) and the suite, then rewrite docs/figures.md's figures table "
                         "from this run")
    ap.add_argument("--merge", metavar="JSON", action="append", default=[],
                    help="with --readme: take the figures this run does not measure from an earlier run's --json "
                         "(e.g. the suite, timed on its own); the table says which run each came from")
    a = ap.parse_args()
    if a.suite:
        a.only = (a.only or list(SECTIONS[:-1])) + ["suite"]
    if a.readme and not a.only:
        a.only = None
    only = set(a.only or SECTIONS)
    started, load0, head = datetime.datetime.now(datetime.timezone.utc), os.getloadavg(), commit()
    print(f"machine: {machine()}; commit {head}; load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    t = Table()
    import triton_dist  # noqa: F401 - after the plain baseline's modules were chosen
    for name, section in (("start-up", startup), ("overhead", overhead), ("scheduler", scheduler),
                          ("scaling", scaling), ("suite", suite)):
        if name in only:
            section(t, a)
    load1 = os.getloadavg()
    print(f"load average at the end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"started": started.isoformat(), "commit": head, "machine": machine(),
                       "load": [load0, load1], "rows": t.rows}, f, indent=1)
    merged = []
    for path in a.merge:
        with open(path) as f:
            earlier = json.load(f)
        keys = [k for k in earlier["rows"] if k not in t.rows]
        t.rows.update({k: earlier["rows"][k] for k in keys})
        if keys:
            l0, l1 = earlier["load"][0][0], earlier["load"][1][0]
            merged.append(f"{len(keys)} figure(s) ({', '.join(sorted(keys))}) from the run of "
                          f"{earlier['started'][:16].replace('T', ' ')} UTC at commit {earlier['commit']} "
                          f"(load average {l0:.2f} at its start, {l1:.2f} at its end)")
    if a.readme:
        write_readme(readme_table(t, started, load0, load1, head, merged))
        print("docs/figures.md: figures table rewritten")
    elif a.only is None:
        print(targets(t))


if __name__ == "__main__":
    main()
