"""Per-op time of the kernel library (triton_dist.kernels) at small shapes.

    python benchmarks/bench_kernels.py [--world-size 4] [--iters 3] [--dtype float32] [--ops LIST]

On the simulator (the default without an NPU) the ranks are started by triton_dist.launch
and the figures measure the simulator (about 1000x slower than an NPU): good for comparing
ops and variants with each other (one-shot vs ring, one launch vs two), not with hardware.
Where `npu-smi` exists, start it under torchrun instead:

    torchrun --nproc-per-node=8 benchmarks/bench_kernels.py

and each op is also timed against torch.distributed (hccl) + torch.matmul doing the same
work (all_gather_into_tensor, reduce_scatter_tensor, all_reduce, all_to_all_single, and
those around torch.matmul for the GEMM ops).  A collective takes as long as its slowest
rank, so the table shows, per op, the median over iterations of the slowest rank.
`--compare-torch` adds the torch column on the simulator too (gloo on the CPU).
"""
import argparse
import os
import statistics
import sys
import time

# op name: (shapes, builder(rank, world, dtype, torch) -> args)
SHAPES = {
    "all_gather": ("x: 64 x 96 per rank", lambda r, n, dt, T: (T.randn(64, 96, dtype=dt),)),
    "reduce_scatter": ("x: (n*64) x 96", lambda r, n, dt, T: (T.randn(n * 64, 96, dtype=dt),)),
    "all_reduce one_shot": ("x: 64 x 96", lambda r, n, dt, T: (T.randn(64, 96, dtype=dt),)),
    "all_reduce ring": ("x: 64 x 96", lambda r, n, dt, T: (T.randn(64, 96, dtype=dt),)),
    "all_to_all": ("x: (n*64) x 96", lambda r, n, dt, T: (T.randn(n * 64, 96, dtype=dt),)),
    "ag_gemm launches=1": ("a: 64 x 96 per rank, b: 96 x 64",
                           lambda r, n, dt, T: (T.randn(64, 96, dtype=dt), T.randn(96, 64, dtype=dt))),
    "ag_gemm launches=2": ("same", lambda r, n, dt, T: (T.randn(64, 96, dtype=dt), T.randn(96, 64, dtype=dt))),
    "gemm_rs launches=1": ("a: (n*64) x 96, b: 96 x 64 per rank",
                           lambda r, n, dt, T: (T.randn(n * 64, 96, dtype=dt), T.randn(96, 64, dtype=dt))),
    "gemm_rs launches=2": ("same", lambda r, n, dt, T: (T.randn(n * 64, 96, dtype=dt), T.randn(96, 64, dtype=dt))),
}


def _ours(name):
    from triton_dist import kernels
    op, _, variant = name.partition(" ")
    if op == "all_reduce":
        return lambda *a: kernels.all_reduce(*a, method=variant)
    if variant.startswith("launches="):
        return lambda *a: getattr(kernels, op)(*a, launches=int(variant[-1]))
    return getattr(kernels, op)


def _theirs(name):
    """The same work with torch.distributed collectives + torch.matmul (the NPU baseline)."""
    import torch
    import torch.distributed as dist
    op = name.split(" ")[0]
    n = dist.get_world_size()

    # newer torch names first (the old ones warn there), the old ones where torch_npu pins an older torch
    gather_into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter_from = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

    def all_gather(x):
        out = x.new_empty((n * x.shape[0],) + tuple(x.shape[1:]))
        gather_into(out, x)
        return out

    def reduce_scatter(x):
        out = x.new_empty((x.shape[0] // n,) + tuple(x.shape[1:]))
        scatter_from(out, x)
        return out

    def all_reduce(x):
        y = x.clone()
        dist.all_reduce(y)
        return y

    def all_to_all(x):
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x)
        return out

    return {"all_gather": all_gather, "reduce_scatter": reduce_scatter, "all_reduce": all_reduce,
            "all_to_all": all_to_all, "ag_gemm": lambda a, b: all_gather(a) @ b,
            "gemm_rs": lambda a, b: reduce_scatter(a @ b)}[op]


def _sync():
    import torch
    import triton_dist
    dev = torch.device(triton_dist.device())
    if dev.type != "cpu":
        getattr(torch, dev.type).synchronize()


def _time(fn, args, iters):
    import triton_dist
    fn(*args)                              # warm-up: workspaces (and compilation on an NPU)
    _sync()
    times = []
    for _ in range(iters):
        triton_dist.barrier()
        t = time.perf_counter()
        fn(*args)
        _sync()
        times.append(time.perf_counter() - t)
    return times


def bench_rank(names, dtype_name, iters, compare):
    """Rank body: {op: (our median seconds per call, torch's or None)}."""
    import torch
    import triton_dist
    from triton_dist import kernels
    r, n = triton_dist.rank(), triton_dist.world_size()
    dt = getattr(torch, dtype_name)
    torch.manual_seed(r)
    out = {}
    for name in names:
        args = tuple(a.to(triton_dist.device()) for a in SHAPES[name][1](r, n, dt, torch))
        ours = statistics.median(_time(_ours(name), args, iters))
        theirs = statistics.median(_time(_theirs(name), args, iters)) if compare else None
        out[name] = (ours, theirs)
    kernels.free_workspaces()
    return out


def report(values, world, dtype_name, backend):
    print(f"triton_dist.kernels on {world} {backend} ranks, {dtype_name}: median seconds per call "
          f"(slowest rank)")
    compare = any(v[1] is not None for v in values[0].values())
    head = f"{'op':22s} {'shapes':40s} {'triton_dist':>12s}"
    print(head + (f" {'torch':>12s} {'ratio':>7s}" if compare else ""))
    for name in values[0]:
        ours = max(v[name][0] for v in values)
        line = f"{name:22s} {SHAPES[name][0]:40s} {ours:12.4f}"
        if compare:
            theirs = max(v[name][1] for v in values)
            line += f" {theirs:12.6f} {ours / theirs:7.2f}"
        print(line)


def main(argv=None):
    p = argparse.ArgumentParser(description="per-op time of triton_dist.kernels")
    p.add_argument("--world-size", type=int, default=4, help="simulated ranks (under torchrun: its world)")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--ops", default=",".join(SHAPES), help="comma list of: " + ", ".join(SHAPES))
    p.add_argument("--compare-torch", action="store_true",
                   help="also time torch.distributed + torch.matmul (on by default on an NPU; on the "
                        "simulator that is gloo on the CPU, a sanity check rather than a baseline)")
    args = p.parse_args(argv)
    names = [s.strip() for s in args.ops.split(",") if s.strip()]
    bad = [s for s in names if s not in SHAPES]
    if bad:
        p.error(f"unknown ops {bad}; choose from {list(SHAPES)}")
    import triton_dist
    compare = args.compare_torch or triton_dist.is_ascend()
    if "RANK" in os.environ:              # torchrun: the NPU path (or the simulator with named heaps)
        import torch.distributed as dist
        from triton_dist import backend
        triton_dist.init()
        mine = bench_rank(names, args.dtype, args.iters, compare)
        vals = [None] * triton_dist.world_size()
        dist.all_gather_object(vals, mine)
        if triton_dist.rank() == 0:
            report(vals, triton_dist.world_size(), args.dtype, backend.resolve())
        triton_dist.finalize()
        return 0
    if triton_dist.is_ascend():
        print("on an NPU, start it with: torchrun --nproc-per-node=N benchmarks/bench_kernels.py", file=sys.stderr)
        return 2
    res = triton_dist.launch(bench_rank, names, args.dtype, args.iters, compare, world_size=args.world_size,
                             timeout=600)
    report(res.values, args.world_size, args.dtype, "simulated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
