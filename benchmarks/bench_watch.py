"""What the device watch (sim/evidence/watch.py) costs the free schedule's hot path, in one process.

    python benchmarks/bench_watch.py [--rounds 12]

One rank runs bench_all's scalar flag kernel and 32x32 block copy kernel (micro_kernels.py,
100 iterations a round), alternating rounds with the rank's observer bus as launch() made
it (the device watch subscribed) and with the bus taken away (rt.observers = None: the
fast path as it was before the watch).  Prints the CPU time per iteration, median and
minimum of each (CPU time: on a loaded machine the wall clock measures the load).
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def body(rounds):
    import torch

    import micro_kernels as K
    import triton_dist
    from triton_dist.sim import context
    rt = context.runtime()
    flag = triton_dist.symm_tensor((16,), torch.int32)
    src, dst = triton_dist.symm_tensor((1024,), torch.float32), triton_dist.symm_tensor((1024,), torch.float32)
    K.scalar_flag_kernel[(1,)](flag, ITERS=2)
    K.block_copy_kernel[(1,)](src, dst, ITERS=2, B=32)
    bus = rt.observers
    out = {f"{k} {s}": [] for k in ("scalar", "block") for s in ("on", "off")}
    for _ in range(rounds):
        for state in ("on", "off"):
            rt.observers = bus if state == "on" else None
            t = time.process_time()
            K.scalar_flag_kernel[(1,)](flag, ITERS=100)
            out["scalar " + state].append((time.process_time() - t) / 100 * 1e6)
            t = time.process_time()
            K.block_copy_kernel[(1,)](src, dst, ITERS=100, B=32)
            out["block " + state].append((time.process_time() - t) / 100 * 1e6)
    rt.observers = bus
    return {k: (statistics.median(v), min(v)) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    a = ap.parse_args()
    import triton_dist
    load = os.getloadavg()
    got = triton_dist.launch(body, a.rounds, world_size=1).values[0]
    print(f"free/ascend, {a.rounds} alternating rounds; load average {load[0]:.1f} at the start")
    for k, (med, mn) in got.items():
        watch = "watch subscribed" if k.endswith("on") else "no observers"
        print(f"{k.split()[0]:8s} {watch:18s} CPU us/iteration: median {med:8.1f}  min {mn:8.1f}")


if __name__ == "__main__":
    main()
