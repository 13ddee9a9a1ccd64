"""What predicting costs: the same runs with and without launch(..., predict=DEVICE).

    python benchmarks/bench_predict.py [--repeat 3]

Prints, per workload, the best wall time of `repeat` launches without and with prediction
(recording in the ranks + the replay in the launcher) and their ratio (target: <= ~1.5x).
Nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton_dist                  # noqa: E402,F401 - first: kernels defined below run on the simulator
import triton                       # noqa: E402
import triton.language as tl        # noqa: E402


@triton.jit
def _memory_loop(x, y, N: tl.constexpr, ROUNDS: tl.constexpr):
    offs = tl.arange(0, N)
    for i in range(ROUNDS):          # nothing but block loads and stores: the recorder's worst case
        tl.store(y + offs, tl.load(x + offs) + i)


def _library():
    import torch

    import triton_dist
    from triton_dist import kernels
    g = torch.Generator().manual_seed(triton_dist.rank())
    a = torch.randn(64, 64, generator=g)
    b = torch.randn(64, 96, generator=g)
    x = torch.randn(4096, generator=g)
    kernels.ag_gemm(a, b)
    kernels.gemm_rs(torch.randn(128, 64, generator=g), b)
    kernels.all_gather(x)
    kernels.all_reduce(x, method="ring")
    kernels.all_reduce(x, method="one_shot")
    return True


def _loop():
    import torch
    x = torch.ones(256)
    y = torch.zeros(256)
    _memory_loop[(4,)](x, y, N=256, ROUNDS=300)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--device", default="atlas-a2")
    args = p.parse_args(argv)
    import triton_dist
    print("| workload | without predict s | with predict s | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for name, fn in (("kernel library, 5 ops, 2 ranks", _library), ("memory-access loop, 1 rank", _loop)):
        world = 2 if fn is _library else 1
        triton_dist.launch(fn, world_size=world)            # warm: compiles, imports
        best = {}
        for pred in (None, args.device):
            ts = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                triton_dist.launch(fn, world_size=world, predict=pred)
                ts.append(time.perf_counter() - t)
            best[pred] = min(ts)
        print(f"| {name} | {best[None]:.3f} | {best[args.device]:.3f} | {best[args.device] / best[None]:.2f}x |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
