"""All simulator figures in one run, one table: overhead, scheduler, scaling, start-up, suite.

    python benchmarks/bench_all.py [--repeat N] [--suite]

Every figure is measured N times in this run on this machine; min and median are printed.
The plain-interpreter baseline runs in a child process that imports only triton
(TRITON_INTERPRET=1), since importing triton_dist patches the interpreter in-process.
The output format is stable (fixed columns, fixed row names) so two runs can be diffed.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

ITERS = 100          # rounds per overhead kernel
SCHEDULES = [("free", "ascend"), ("free", "coherent"), ("random", "ascend"), ("random", "coherent"),
             ("pct", "ascend"), ("pct", "coherent")]


def overhead_kernels(repeat):
    """Seconds per round of the three overhead kernels, in whatever mode this process runs."""
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
    out = {"block": [], "scalar": [], "dot": []}
    K.block_copy_kernel[(1,)](src, dst, ITERS=2, B=32)
    for _ in range(repeat):
        t = time.perf_counter()
        K.block_copy_kernel[(1,)](src, dst, ITERS=ITERS, B=32)
        out["block"].append((time.perf_counter() - t) / ITERS)
        t = time.perf_counter()
        K.scalar_flag_kernel[(1,)](flag, ITERS=ITERS)
        out["scalar"].append((time.perf_counter() - t) / ITERS)
        t = time.perf_counter()
        K.dot_kernel[(1,)](a, b, c, ITERS=ITERS // 10, B=64)
        out["dot"].append((time.perf_counter() - t) / (ITERS // 10))
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


class Table:
    def __init__(self):
        print(f"{'figure':58s} {'min':>12s} {'median':>12s} {'ratio':>8s}")

    def row(self, name, xs, unit, fmt="{:10.1f}", ratio=""):
        scale = {"us": 1e6, "ms": 1e3, "s": 1.0, "/s": 1.0, "": 1.0}[unit]
        mn, md = min(xs) * scale, statistics.median(xs) * scale
        print(f"{name:58s} {fmt.format(mn)}{unit:>2s} {fmt.format(md)}{unit:>2s} {ratio:>8s}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--suite", action="store_true", help="also time the whole test suite (pytest -n auto)")
    a = ap.parse_args()
    import torch
    import triton
    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, triton {triton.__version__}, "
          f"torch {torch.__version__}, {platform.machine()}")
    base = plain_interpreter(a.repeat)
    t = Table()

    # start-up
    imp = []
    for _ in range(3):
        s = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import triton_dist"], check=True)
        imp.append(time.perf_counter() - s)
    t.row("start-up: import triton_dist (fresh process)", imp, "s", "{:10.3f}")
    import triton_dist
    triton_dist.launch(lambda: None, world_size=4)
    launches = []
    for _ in range(a.repeat):
        s = time.perf_counter()
        triton_dist.launch(lambda: None, world_size=4)
        launches.append(time.perf_counter() - s)
    t.row("start-up: launch(world_size=4), empty body", launches, "ms")

    # overhead
    names = {"block": "32x32 fp32 block load+store", "scalar": "scalar flag store+load",
             "dot": "64x64x64 fp32 dot"}
    sim = {}
    for sched, model in SCHEDULES:
        sim[(sched, model)] = triton_dist.launch(overhead_kernels, a.repeat, world_size=1, schedule=sched,
                                                 seed=1, memory_model=model).values[0]
    for k, label in names.items():
        ref = statistics.median(base[k])
        t.row(f"overhead: {label}, plain interpreter", base[k], "us")
        for sched, model in SCHEDULES:
            xs = sim[(sched, model)][k]
            t.row(f"overhead: {label}, {sched}/{model}", xs, "us",
                  ratio=f"{statistics.median(xs) / ref:.2f}x")

    # scheduler
    for sched in ("random", "pct"):
        rates, sw = [], []
        for seed in range(a.repeat):
            st, n_sw, dt = triton_dist.launch(scheduler_alone, 5000, world_size=2, schedule=sched,
                                              seed=seed).values[0]
            rates.append(st / dt)
            sw.append(n_sw / dt)
        t.row(f"scheduler: steps/s, {sched}, 2 ranks", rates, "/s", "{:10.0f}")
        t.row(f"scheduler: rank switches/s, {sched}, 2 ranks", sw, "/s", "{:10.0f}")
        kern = [triton_dist.launch(ping_pong_steps, world_size=2, schedule=sched, seed=s).values[0]
                for s in range(a.repeat)]
        t.row(f"scheduler: steps/s in a ping-pong kernel, {sched}, 2 ranks",
              [st / dt for st, _, dt in kern], "/s", "{:10.0f}")

    # scaling (on this machine's cores; ranks beyond them share CPUs)
    try:
        from triton_dist import kernels  # noqa: F401
        have_kernels = True
    except ImportError:
        have_kernels = False
    if have_kernels:
        for op, rows in (("all_reduce ring", 64), ("ag_gemm", 32)):
            for n in (1, 2, 4, 8):
                wall = [max(triton_dist.launch(scaling_body, op, rows, world_size=n).values)
                        for _ in range(max(1, a.repeat // 2))]
                steps = [triton_dist.launch(scaling_body, op, rows, world_size=n, schedule="pct",
                                            seed=0).steps]
                t.row(f"scaling: {op}, {rows} rows/rank, {n} ranks, wall", wall, "ms")
                t.row(f"scaling: {op}, {rows} rows/rank, {n} ranks, pct steps (whole run)",
                      steps, "", "{:10.0f}")

    if a.suite:
        s = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "pytest", "-n", "auto", "-q", "-p", "no:cacheprovider"],
                           cwd=ROOT, capture_output=True, text=True)
        dt = time.perf_counter() - s
        last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "?"
        t.row(f"suite: pytest -n auto ({last.strip('= ')})", [dt], "s", "{:10.1f}")


if __name__ == "__main__":
    main()
