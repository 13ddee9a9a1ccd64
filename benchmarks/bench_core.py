"""Core figures: launch overhead, import time, kernel launch and block load/store cost on the
simulator against Triton's own interpreter running the same kernels in the same run.

    python benchmarks/bench_core.py [--repeat N]

The plain-interpreter baseline runs in a child process that imports only triton
(TRITON_INTERPRET=1), since importing triton_dist patches the interpreter in-process.
Each figure is repeated N times; min and median are printed.
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
sys.path.insert(0, HERE)

ITERS = 200


def stats(xs):
    return min(xs), statistics.median(xs)


def kernel_timings(repeat):
    """Per-call seconds of the empty kernel and of ITERS 32x32 block load+store rounds."""
    import torch
    import micro_kernels as K
    src = torch.randn(32 * 32)
    dst = torch.zeros(32 * 32)
    if "triton_dist" in sys.modules:
        import triton_dist
        src2 = triton_dist.symm_tensor((32 * 32,), torch.float32)
        src2.copy_(src)
        src = src2
    K.empty_kernel[(1,)](src)
    empty, block = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(20):
            K.empty_kernel[(1,)](src)
        empty.append((time.perf_counter() - t) / 20)
        t = time.perf_counter()
        K.block_copy_kernel[(1,)](src, dst, ITERS=ITERS, B=32)
        block.append((time.perf_counter() - t) / ITERS)
    return {"empty": empty, "block": block}


def plain_interpreter(repeat):
    code = ("import json,sys; sys.path.insert(0, %r); import bench_core as b; "
            "print(json.dumps(b.kernel_timings(%d)))" % (HERE, repeat))
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    import torch
    import triton
    base = plain_interpreter(a.repeat)

    import triton_dist
    t = []
    for _ in range(3):
        s = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import triton_dist"], check=True)
        t.append(time.perf_counter() - s)
    imp = stats(t)
    launch = []
    triton_dist.launch(lambda: None, world_size=4)
    for _ in range(a.repeat):
        s = time.perf_counter()
        triton_dist.launch(lambda: None, world_size=4)
        launch.append(time.perf_counter() - s)
    sim = triton_dist.launch(kernel_timings, a.repeat, world_size=1).values[0]

    print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, triton {triton.__version__}, "
          f"torch {torch.__version__}")
    print(f"{'figure':48s} {'min':>10s} {'median':>10s} {'ratio':>7s}")

    def row(name, xs, unit=1e3, suffix="ms", ref=None):
        mn, md = stats(xs) if isinstance(xs, list) else xs
        ratio = f"{md / statistics.median(ref):.2f}x" if ref else ""
        print(f"{name:48s} {mn * unit:8.3f}{suffix} {md * unit:8.3f}{suffix} {ratio:>7s}")

    row("import triton_dist (fresh process)", list(imp), 1, " s")
    row("launch(world_size=4), empty body", launch, 1e3)
    row("empty kernel launch, plain interpreter", base["empty"], 1e6, "us")
    row("empty kernel launch, simulator", sim["empty"], 1e6, "us", base["empty"])
    row("32x32 fp32 block load+store, plain interpreter", base["block"], 1e6, "us")
    row("32x32 fp32 block load+store, simulator", sim["block"], 1e6, "us", base["block"])


if __name__ == "__main__":
    main()
