"""Figures of backend "cuda" on NVIDIA GPUs, each against its torch baseline in the same run.

    TRITON_DIST_BACKEND=cuda python benchmarks/bench_cuda.py [--world-size N] [--quick] [--out FILE]

- AG+GEMM: kernels.ag_gemm(a_shard, b) vs NCCL all_gather_into_tensor + torch.matmul (cuBLAS),
  not overlapped; GEMM+RS: kernels.gemm_rs(a, b) vs torch.matmul + NCCL reduce_scatter_tensor.
  Shapes: M = 8192 rows in all (M / world_size per rank for AG+GEMM), N in {8192, 28672},
  K in {4096, 8192}, bf16.  Each result is checked against the baseline's (relative error).
- AllGather and AllReduce bandwidth, 1 KiB .. 256 MiB, vs NCCL: algorithm bandwidth
  = bytes of the full result / time.
With one GPU (world size 1) the GEMM ops do no communication: their rows measure the
library's Triton GEMM against cuBLAS, the compute half of the overlap.

Timing: CUDA events around `iters` back-to-back calls after `warmup` calls, all ranks
released together by a barrier; rank 0's figure is reported (min over ranks is not taken:
collectives end together).  Nothing is asserted: this script prints figures.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GEMM_SHAPES = [(8192, 8192, 4096), (8192, 8192, 8192), (8192, 28672, 4096), (8192, 28672, 8192)]
QUICK_SHAPES = [(8192, 8192, 4096), (8192, 28672, 8192)]
SIZES = [1 << k for k in range(10, 29, 2)]            # 1 KiB .. 256 MiB
QUICK_SIZES = [1 << 10, 1 << 20, 1 << 26, 1 << 28]


def _timed(fn, iters, warmup, barrier):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def _rel_err(x, ref):
    x, ref = x.float(), ref.float()
    return ((x - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()


def _show(rank, row):
    """Progress: rank 0 prints each row as it is measured (the table comes at the end)."""
    if rank == 0:
        print("[bench_cuda]", json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}),
              flush=True)


def _rank(quick):
    import torch
    import torch.distributed as dist

    import triton_dist
    from triton_dist import kernels
    r, n = triton_dist.rank(), triton_dist.world_size()
    dev = triton_dist.device()
    nccl = dist.new_group(backend="nccl") if n > 1 else None

    def barrier():
        triton_dist.barrier()

    gen = torch.Generator(device=dev).manual_seed(1234)     # the same inputs on every rank (the references rely on it)
    rows = []
    iters, warmup = (5, 2) if quick else (10, 3)
    for (M, N, K) in (QUICK_SHAPES if quick else GEMM_SHAPES):
        m = M // n
        b = torch.randn(K, N, generator=gen, device=dev, dtype=torch.bfloat16) / K ** 0.5
        # AG+GEMM
        a = torch.randn(m, K, generator=gen, device=dev, dtype=torch.bfloat16)
        full = torch.empty(M, K, device=dev, dtype=torch.bfloat16)

        def ag_base():
            if nccl is not None:
                dist.all_gather_into_tensor(full, a, group=nccl)
            else:
                full.copy_(a)
            return torch.matmul(full, b)

        got = kernels.ag_gemm(a, b)
        err = _rel_err(got, ag_base())
        ag_base()
        ref_err = _rel_err(got[:256], full[:256].float() @ b.float())     # against an fp32 product too
        t_ours = _timed(lambda: kernels.ag_gemm(a, b), iters, warmup, barrier)
        t_base = _timed(ag_base, iters, warmup, barrier)
        t_mm = _timed(lambda: torch.matmul(full, b), iters, warmup, barrier)
        t_rowmajor = _timed(lambda: kernels.ag_gemm(a, b, group_m=1), iters, warmup, barrier)
        rows.append(dict(op="ag_gemm", M=M, N=N, K=K, ours_ms=t_ours, base_ms=t_base, matmul_ms=t_mm, rel_err=err,
                         rowmajor_ms=t_rowmajor,
                         ref_err=ref_err, tflops=2 * M * N * K / t_ours / 1e9))
        _show(r, rows[-1])
        del a, full
        # GEMM+RS: every rank holds (M, K) and (K, N); the sum of the n products is scattered by rows
        a = torch.randn(M, K, generator=gen, device=dev, dtype=torch.bfloat16)
        part = torch.empty(m, N, device=dev, dtype=torch.bfloat16)

        def rs_base():
            c = torch.matmul(a, b)
            if nccl is not None:
                dist.reduce_scatter_tensor(part, c, group=nccl)
                return part
            return c

        got = kernels.gemm_rs(a, b)
        err = _rel_err(got, rs_base())
        ref_err = _rel_err(got[:256], (a.float() @ b.float())[r * m:r * m + 256] * n)   # same a, b on every rank
        t_ours = _timed(lambda: kernels.gemm_rs(a, b), iters, warmup, barrier)
        t_base = _timed(rs_base, iters, warmup, barrier)
        t_mm = _timed(lambda: torch.matmul(a, b), iters, warmup, barrier)
        t_rowmajor = _timed(lambda: kernels.gemm_rs(a, b, group_m=1), iters, warmup, barrier)
        rows.append(dict(op="gemm_rs", M=M, N=N, K=K, ours_ms=t_ours, base_ms=t_base, matmul_ms=t_mm, rel_err=err,
                         rowmajor_ms=t_rowmajor,
                         ref_err=ref_err, tflops=2 * M * N * K / t_ours / 1e9))
        _show(r, rows[-1])
        del a, b, part
        kernels.free_workspaces()
        torch.cuda.empty_cache()
    if n > 1:
        for size in (QUICK_SIZES if quick else SIZES):
            per = max(1, size // n // 4)                    # fp32 elements per rank
            x = torch.randn(per, generator=gen, device=dev)
            out = torch.empty(per * n, device=dev)
            t_ours = _timed(lambda: kernels.all_gather(x), iters, warmup, barrier)
            t_base = _timed(lambda: dist.all_gather_into_tensor(out, x, group=nccl), iters, warmup, barrier)
            err = _rel_err(kernels.all_gather(x), (dist.all_gather_into_tensor(out, x, group=nccl), out)[1])
            rows.append(dict(op="all_gather", bytes=per * n * 4, ours_ms=t_ours, base_ms=t_base, rel_err=err))
            _show(r, rows[-1])
            y = torch.randn(per * n, generator=gen, device=dev)
            z = y.clone()
            t_base = _timed(lambda: dist.all_reduce(z, group=nccl), iters, warmup, barrier)
            z = y.clone()
            dist.all_reduce(z, group=nccl)
            for method in ("one_shot", "ring"):      # both, in the same order on every rank
                t = _timed(lambda: kernels.all_reduce(y, method=method), iters, warmup, barrier)
                err = _rel_err(kernels.all_reduce(y, method=method), z)
                rows.append(dict(op="all_reduce", bytes=per * n * 4, ours_ms=t, base_ms=t_base, method=method,
                                 rel_err=err))
                _show(r, rows[-1])
            del x, out, y, z
            kernels.free_workspaces()
    if n > 1:
        # host cost of one small call: wall time per call while the GPU keeps up (launch-bound)
        x = torch.randn(256, generator=gen, device=dev)
        for name, f in (("all_gather", lambda: kernels.all_gather(x)),
                        ("nccl all_gather", lambda: dist.all_gather_into_tensor(torch.empty(256 * n, device=dev), x,
                                                                                group=nccl))):
            for _ in range(20):
                f()
            torch.cuda.synchronize()
            barrier()
            t = time.perf_counter()
            for _ in range(200):
                f()
            host_us = (time.perf_counter() - t) / 200 * 1e6
            torch.cuda.synchronize()
            rows.append(dict(op="host_us", what=name, host_us=host_us))
            _show(r, rows[-1])
    props = torch.cuda.get_device_properties(dev)
    return dict(rank=r, world_size=n, gpu=props.name, sms=props.multi_processor_count, rows=rows)


SWEEP = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 4, 4), (128, 128, 64, 8, 4),
         (256, 128, 64, 8, 3), (128, 256, 32, 8, 5)]


def _sweep_rank(shape):
    """Time the GEMM ops under each tile config of SWEEP (GEMM tuning for the profile)."""
    import torch

    import triton_dist
    from triton_dist import kernels
    from triton_dist.kernels import _common as C
    M, N, K = shape
    r, n = triton_dist.rank(), triton_dist.world_size()
    dev = triton_dist.device()
    gen = torch.Generator(device=dev).manual_seed(1234)
    b = torch.randn(K, N, generator=gen, device=dev, dtype=torch.bfloat16) / K ** 0.5
    a_ag = torch.randn(M // n, K, generator=gen, device=dev, dtype=torch.bfloat16)
    a_rs = torch.randn(M, K, generator=gen, device=dev, dtype=torch.bfloat16)
    prof = C.profile()
    rows = []
    for bm, bn, bk, warps, stages in SWEEP:
        prof.gemm = lambda dtype, c=(bm, bn, bk), o=dict(num_warps=warps, num_stages=stages): (c, o)
        for gm in (8, 16):
            row = dict(cfg=f"{bm}x{bn}x{bk} w{warps} s{stages} g{gm}")
            for op, f in (("ag_gemm", lambda: kernels.ag_gemm(a_ag, b, group_m=gm)),
                          ("gemm_rs", lambda: kernels.gemm_rs(a_rs, b, group_m=gm))):
                try:
                    row[op] = _timed(f, 5, 2, triton_dist.barrier)
                except Exception as e:  # noqa: BLE001 - a config that does not fit (shared memory)
                    row[op] = f"{type(e).__name__}"
            _show(r, row)
            rows.append(row)
    return rows


def _sweep_rs_rank():
    """GEMM+RS under several consumer (reduce) program counts."""
    import torch

    import triton_dist
    from triton_dist import kernels
    r = triton_dist.rank()
    dev = triton_dist.device()
    gen = torch.Generator(device=dev).manual_seed(1234)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    for M, N, K in ((8192, 8192, 4096), (8192, 28672, 4096), (8192, 28672, 8192)):
        b = torch.randn(K, N, generator=gen, device=dev, dtype=torch.bfloat16) / K ** 0.5
        a = torch.randn(M, K, generator=gen, device=dev, dtype=torch.bfloat16)
        row = dict(shape=f"{M}x{N}x{K}")
        for nc in (8, 16, 24, 32, 48):
            row[f"c{nc}"] = _timed(lambda: kernels.gemm_rs(a, b, producers=sms - nc, consumers=nc), 5, 2,
                                   triton_dist.barrier)
        _show(r, row)
        del a, b
        kernels.free_workspaces()


def _table(res) -> str:
    lines = [f"{res['world_size']} x {res['gpu']} ({res['sms']} SMs); times in ms (CUDA events, mean of back-to-back "
             f"calls); speedup = baseline / ours", "",
             "| op | M | N | K | ours | baseline | speedup | cuBLAS matmul alone | our TFLOP/s | ours, tiles row-major "
             "| rel. err vs baseline | vs fp32 |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in res["rows"]:
        if row["op"] in ("ag_gemm", "gemm_rs"):
            lines.append(f"| {row['op']} | {row['M']} | {row['N']} | {row['K']} | {row['ours_ms']:.3f} | "
                         f"{row['base_ms']:.3f} | {row['base_ms'] / row['ours_ms']:.2f}x | {row['matmul_ms']:.3f} | "
                         f"{row['tflops']:.0f} | {row['rowmajor_ms']:.3f} | {row['rel_err']:.1e} | {row['ref_err']:.1e} |")
    coll = [row for row in res["rows"] if row["op"] in ("all_gather", "all_reduce")]
    if coll:
        lines += ["", "| op | bytes | ours GB/s | NCCL GB/s | ours / NCCL | ours ms | NCCL ms |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for row in coll:
            bw = lambda t: row["bytes"] / t / 1e6      # noqa: E731 - GB/s from ms
            name = row["op"] + (f" ({row['method']})" if "method" in row else "")
            lines.append(f"| {name} | {row['bytes']} | {bw(row['ours_ms']):.1f} | {bw(row['base_ms']):.1f} | "
                         f"{row['base_ms'] / row['ours_ms']:.2f} | {row['ours_ms']:.4f} | {row['base_ms']:.4f} |")
    host = [row for row in res["rows"] if row["op"] == "host_us"]
    if host:
        lines += ["", "Host time per small call (1 KiB, 200 calls back to back, wall clock): " +
                  ", ".join(f"{row['what']} {row['host_us']:.0f} us" for row in host)]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world-size", type=int, default=None, help="ranks, one per GPU (default: every GPU)")
    p.add_argument("--quick", action="store_true", help="two GEMM shapes, four sizes, fewer iterations")
    p.add_argument("--out", default=None, help="also write the table (markdown) and the raw JSON next to it")
    p.add_argument("--sweep", choices=["tiles", "rs"], default=None,
                   help="instead: time GEMM tile configs at M=8192 N=28672 K=8192 (tiles), or GEMM+RS "
                        "consumer counts (rs)")
    args = p.parse_args(argv)
    os.environ.setdefault("TRITON_DIST_BACKEND", "cuda")
    os.environ.setdefault("TRITON_DIST_HEAP_SIZE", str(6 << 30))
    import triton_dist
    from triton_dist.backend_cuda.runtime import device_count
    n = args.world_size or device_count()
    if n < 1:
        print("bench_cuda: no NVIDIA GPU here (nvidia-smi not on PATH)", file=sys.stderr)
        return 2
    t0 = time.time()
    if args.sweep == "tiles":
        triton_dist.launch(_sweep_rank, (8192, 28672, 8192), world_size=n, backend="cuda", timeout=580)
        return 0
    if args.sweep == "rs":
        triton_dist.launch(_sweep_rs_rank, world_size=n, backend="cuda", timeout=580)
        return 0
    res = triton_dist.launch(_rank, args.quick, world_size=n, backend="cuda", timeout=580).values[0]
    text = _table(res) + f"\n\n(bench_cuda.py, {time.strftime('%Y-%m-%d')}, {time.time() - t0:.0f} s)"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
