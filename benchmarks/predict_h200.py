"""Validate the performance model: predict the shapes of benchmarks/bench_cuda.py on
`h200-nvlink` from simulator runs, next to the times measured on 2 x H200; then predict the
kernel library on `atlas-a2` (no NPU has checked those).

    python benchmarks/predict_h200.py [--out benchmarks/results/predict_2026-11-30.md] [--quick]

The simulator runs the kernels with the launch configuration they have on the H200 (132
programs, 128x256x64 GEMM tiles in groups of 8 tile rows, the same producer/consumer split):
kernels/_common.Profile is replaced by one that answers as on a 132-SM GPU.  What is too
large to interpret is recorded smaller and scaled (model.py `scale`), as stated per row:
- GEMMs: every dimension of the problem AND of the tiles divided by S (same tile grid, same
  programs, same signals), and 2 k-steps instead of K/64.  Factors: dot FLOPs S^3 * C, loads
  feeding a dot and the AG pushes S^2 * C (C = (K/64) / 2), other loads/stores S^2.
- collectives: the same program count, fewer bytes; every byte count times the size ratio.
The scaling is checked by predicting one problem both ways (recorded directly vs scaled).
Measured: benchmarks/results/cuda_2xH200_2026-11-30.json (CUDA events, back-to-back calls).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TRITON_DIST_HEAP_SIZE", str(1 << 30))

HERE = os.path.dirname(os.path.abspath(__file__))
MEASURED = os.path.join(HERE, "results", "cuda_2xH200_2026-11-30.json")


def _as_gpu(tiles):
    """Make the kernel library size its launches as on a 132-SM H200 (inside a rank)."""
    from triton_dist.kernels import _common as C
    prof = object.__new__(C.Profile)
    prof.cuda, prof.sms, prof.group_m = True, 132, 8
    prof.gemm = lambda dtype: (tiles, {})
    C._profiles.clear()
    C._profiles[("sim", "")] = prof
    C.dot_upcast = lambda dtype: False        # bf16 tl.dot is bf16 (sim/interp.py widens it exactly)


def _gemm_rank(op, M, N, K, tiles, gpu, launches):
    import torch

    import triton_dist
    from triton_dist import kernels
    if gpu:
        _as_gpu(tiles)
    n = triton_dist.world_size()
    g = torch.Generator().manual_seed(1)
    b = (torch.randn(K, N, generator=g) / K ** 0.5).to(torch.bfloat16)
    kw = {} if gpu else dict(block_m=tiles[0], block_n=tiles[1], block_k=tiles[2])
    if op == "ag_gemm":
        a = torch.randn(M // n, K, generator=g).to(torch.bfloat16)
        kernels.ag_gemm(a, b, launches=launches, **kw)
    else:
        a = torch.randn(M, K, generator=g).to(torch.bfloat16)
        kernels.gemm_rs(a, b, launches=launches, **kw)
    return True


def _coll_rank(op, nbytes, gpu):
    import torch

    import triton_dist
    from triton_dist import kernels
    if gpu:
        _as_gpu((128, 256, 64))
    n = triton_dist.world_size()
    per = max(1, nbytes // n // 4)
    if op == "all_gather":
        kernels.all_gather(torch.randn(per))
    else:
        kernels.all_reduce(torch.randn(per * n), method=op.split(":")[1])
    return True


_GEMM_RECORDS: dict = {}


def predict_gemm(device, op, M, N, K, S, steps=2, gpu=True, launches=1, world=2, tiles=(128, 256, 64)):
    """Predicted us of one call, recorded at 1/S of every dimension with `steps` k-steps (S=None: as is).
    A scaled recording does not depend on K (only its factors do): it is made once per shape and reused."""
    import triton_dist
    from triton_dist.sim.predict import predict_records
    bm, bn, bk = tiles
    if S is None:
        rec, scale = (M, N, K, tiles), None
    else:
        t = (bm // S, bn // S, bk // S)
        c = (K / bk) / steps
        rec = (M // S, N // S, t[2] * steps, t)
        scale = {"dot": S ** 3 * c, "feed": S * S * c, "rma": S * S * c, "mem": S * S, "steps": c}
    key = (device, op, rec, gpu, launches, world)
    if key not in _GEMM_RECORDS:
        triton_dist.launch(_gemm_rank, op, rec[0], rec[1], rec[2], rec[3], gpu, launches, world_size=world,
                           predict=device, timeout=900)
        _GEMM_RECORDS[key] = _RECORDS.pop()
    return predict_records(_GEMM_RECORDS[key], device, scale)


def predict_coll(device, op, nbytes, record_bytes, gpu=True, world=2):
    import triton_dist
    res = triton_dist.launch(_coll_rank, op, record_bytes, gpu, world_size=world, predict=device, timeout=600)
    f = nbytes / record_bytes
    return _replay(res, device, None if f == 1 else {"mem": f, "rma": f, "feed": f})


def _replay(res, device, scale):
    """The run's record replayed with `scale` (LaunchResult.prediction is the unscaled one)."""
    from triton_dist.sim.predict import predict_records
    recs = _RECORDS.pop()
    return res.prediction if scale is None else predict_records(recs, device, scale)


_RECORDS: list = []


def _keep_records():
    """Keep each launch's raw records so that they can be replayed with a scale."""
    import triton_dist.sim.predict as P
    orig = P.finish

    def finish(result, state, device, ok):
        if ok:
            _RECORDS.append(P.read_records(state[0]))
        return orig(result, state, device, ok)
    P.finish = finish


def _err(p, m):
    return f"{(p - m) / m * 100:+.0f}%"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="two GEMM shapes, two sizes")
    args = ap.parse_args(argv)
    _keep_records()
    meas = json.load(open(MEASURED))["rows"]
    t0 = time.time()
    lines = ["## h200-nvlink: predicted vs measured (2 x H200, bf16, back-to-back calls)", "",
             "Predicted per call = max(host cost of a call, the launch's predicted device time) (profile "
             "launch.host_per_call_s; calls are issued back to back, as bench_cuda.py times them).", "",
             "| op | shape / bytes | recorded as | predicted ms | measured ms | error | busiest pipe | "
             "overlap vs baseline: measured / predicted |",
             "| --- | --- | --- | ---: | ---: | ---: | --- | --- |"]
    shapes = [(8192, 8192, 4096), (8192, 8192, 8192), (8192, 28672, 4096), (8192, 28672, 8192)]
    if args.quick:
        shapes = shapes[:1]
    S = 4
    for (M, N, K) in shapes:
        for op in ("ag_gemm", "gemm_rs"):
            pred = predict_gemm("h200-nvlink", op, M, N, K, S)
            p_ms = pred.back_to_back_us() / 1e3
            row = next(r for r in meas if r["op"] == op and (r["M"], r["N"], r["K"]) == (M, N, K))
            m_ms, base = row["ours_ms"], row["base_ms"]
            sign_m = "wins" if base > m_ms else "loses"
            sign_p = "wins" if base > p_ms else "loses"
            lp = pred.launches[0]
            lines.append(f"| {op} | {M}x{N}x{K} | 1/{S} per dim, 2 k-steps | {p_ms:.3f} | {m_ms:.3f} | "
                         f"{_err(p_ms, m_ms)} | {lp.busiest_pipe} ({lp.pipe_share[lp.busiest_pipe]:.0%}) | "
                         f"{sign_m} / {sign_p}{'' if sign_m == sign_p else ' (WRONG SIGN)'} |")
            print(lines[-1], flush=True)
    sizes = [1 << 20, 16 << 20, 64 << 20, 256 << 20] if not args.quick else [1 << 20, 64 << 20]
    for op in ("all_gather", "all_reduce:one_shot", "all_reduce:ring"):
        for nbytes in sizes:
            rec = min(nbytes, 64 << 20)
            pred = predict_coll("h200-nvlink", op, nbytes, rec)
            p_ms = pred.back_to_back_us() / 1e3
            name, method = (op.split(":") + [None])[:2]
            row = next(r for r in meas if r["op"] == name and r["bytes"] == nbytes and r.get("method") == method)
            m_ms = row["ours_ms"]
            lp = pred.launches[0]
            dev_ms = pred.total_us / 1e3
            lines.append(f"| {op.replace(':', ' ')} | {nbytes >> 20} MiB | "
                         f"{'as is' if rec == nbytes else f'{rec >> 20} MiB x {nbytes // rec}'} | {p_ms:.3f} "
                         f"(device {dev_ms:.3f}) | {m_ms:.3f} | {_err(p_ms, m_ms)} | "
                         f"{lp.busiest_pipe} ({lp.pipe_share[lp.busiest_pipe]:.0%}) | |")
            print(lines[-1], flush=True)
    # the scaling, checked: one problem recorded as is and recorded smaller, then scaled
    lines += ["", "Scaling check (h200-nvlink, device time of the launch, us):", "",
              "| problem | recorded as is | recorded scaled | difference |", "| --- | ---: | ---: | ---: |"]
    for op in ("ag_gemm", "gemm_rs"):
        direct = predict_gemm("h200-nvlink", op, 1024, 2048, 512, None).total_us
        scaled = predict_gemm("h200-nvlink", op, 1024, 2048, 512, 4).total_us
        lines.append(f"| {op} 1024x2048x512 (1/4 per dim, 2 k-steps of 8) | {direct:.1f} | {scaled:.1f} | "
                     f"{_err(scaled, direct)} |")
        print(lines[-1], flush=True)
    for op in ("all_gather", "all_reduce:ring"):
        direct = predict_coll("h200-nvlink", op, 64 << 20, 64 << 20).total_us
        scaled = predict_coll("h200-nvlink", op, 64 << 20, 16 << 20).total_us
        lines.append(f"| {op} 64 MiB (16 MiB x 4) | {direct:.1f} | {scaled:.1f} | {_err(scaled, direct)} |")
        print(lines[-1], flush=True)
    # atlas-a2: the kernel library with its NPU configuration (simulator defaults)
    lines += ["", "## atlas-a2: PREDICTIONS ONLY, NO NPU HAS CHECKED THESE (2 ranks, bf16)", "",
              "| op | shape / bytes | recorded as | predicted us (device) | busiest pipe | waiting us | "
              "one launch (overlap) vs two launches (gather, then GEMM) |",
              "| --- | --- | --- | ---: | --- | ---: | --- |"]
    for (M, N, K) in ([(1024, 1024, 1024), (2048, 2048, 2048)] if not args.quick else [(1024, 1024, 1024)]):
        for op in ("ag_gemm", "gemm_rs"):
            one = predict_gemm("atlas-a2", op, M, N, K, 1, gpu=False, tiles=(32, 32, 32))
            two = predict_gemm("atlas-a2", op, M, N, K, 1, gpu=False, tiles=(32, 32, 32), launches=2)
            lp = one.launches[0]
            lines.append(f"| {op} | {M}x{N}x{K} | tiles 32x32x32, 2 k-steps scaled | {one.total_us:.1f} | "
                         f"{lp.busiest_pipe} ({lp.pipe_share[lp.busiest_pipe]:.0%}) | {lp.wait_us:.1f} | "
                         f"{one.total_us:.1f} vs {two.total_us:.1f} us: "
                         f"{'overlap wins' if one.total_us < two.total_us else 'overlap loses'} |")
            print(lines[-1], flush=True)
    for op in ("all_gather", "all_reduce:one_shot", "all_reduce:ring"):
        for nbytes in (1 << 20, 16 << 20, 64 << 20):
            pred = predict_coll("atlas-a2", op, nbytes, 1 << 20, gpu=False)
            lp = pred.launches[0]
            lines.append(f"| {op.replace(':', ' ')} | {nbytes >> 20} MiB | "
                         f"{'as is' if nbytes == 1 << 20 else f'1 MiB x {nbytes >> 20}'} | {pred.total_us:.1f} | "
                         f"{lp.busiest_pipe} ({lp.pipe_share[lp.busiest_pipe]:.0%}) | {lp.wait_us:.1f} | |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + f"\n\n(benchmarks/predict_h200.py, {time.strftime('%Y-%m-%d')}, {time.time() - t0:.0f} s)\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
