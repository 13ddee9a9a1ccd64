"""Scheduler figures: steps per second, and the cost of deterministic schedules against the
free one and against Triton's own interpreter on the same kernel, in one run.

    python benchmarks/bench_schedules.py [--repeat N]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_core  # noqa: E402


def block_loop(iters):
    import torch
    import triton_dist
    import micro_kernels as K
    src = triton_dist.symm_tensor((1024,), torch.float32)
    dst = triton_dist.symm_tensor((1024,), torch.float32)
    K.block_copy_kernel[(1,)](src, dst, ITERS=2, B=32)
    t = time.perf_counter()
    K.block_copy_kernel[(1,)](src, dst, ITERS=iters, B=32)
    return (time.perf_counter() - t) / iters


def ping_pong():
    """(scheduling steps, baton switches, seconds) of a 200-round signal ping-pong, timed
    inside the ranks, so launch and rendezvous costs are left out."""
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


def scheduler_alone(n):
    """Steps/s of the scheduler alone: every rank's host task takes n scheduling points
    with no kernel work between them (the baton crosses processes on most steps)."""
    import triton_dist
    sched = triton_dist._backend.active().rt.sched
    triton_dist.barrier()
    s0, w0, t = sched.sh.steps(), sched.sh.switches(), time.perf_counter()
    for _ in range(n):
        sched.point("bench")
    triton_dist.barrier()
    return sched.sh.steps() - s0, sched.sh.switches() - w0, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    base = bench_core.plain_interpreter(a.repeat)["block"]
    import triton_dist
    rows = []
    for sched in ("free", "random", "pct"):
        for model in ("ascend", "coherent"):
            xs = [triton_dist.launch(block_loop, 200, world_size=1, schedule=sched, seed=1,
                                     memory_model=model).values[0] for _ in range(a.repeat)]
            rows.append((f"block loop, {sched}, {model}", xs))
    steps = []
    for sched in ("random", "pct"):
        for seed in range(a.repeat):
            r = triton_dist.launch(ping_pong, world_size=2, schedule=sched, seed=seed)
            st, sw, dt = r.values[0]
            steps.append((sched, st, sw, dt))
    alone = []
    for sched in ("random", "pct"):
        for seed in range(a.repeat):
            st, sw, dt = triton_dist.launch(scheduler_alone, 5000, world_size=2, schedule=sched,
                                            seed=seed).values[0]
            alone.append((sched, st, sw, dt))
    print(f"{'figure':44s} {'min':>10s} {'median':>10s} {'vs interp':>10s} {'vs free':>8s}")
    med_base = statistics.median(base)
    print(f"{'block loop, plain interpreter':44s} {min(base)*1e6:8.1f}us {med_base*1e6:8.1f}us")
    free = {m: statistics.median(xs) for n, xs in rows if n.startswith("block loop, free") for m in [n.split()[-1]]}
    for name, xs in rows:
        md = statistics.median(xs)
        print(f"{name:44s} {min(xs)*1e6:8.1f}us {md*1e6:8.1f}us {md/med_base:9.2f}x "
              f"{md/free[name.split()[-1]]:7.2f}x")
    for label, data in (("scheduler alone, 2 ranks", alone), ("ping-pong kernel, 2 ranks", steps)):
        for sched in ("random", "pct"):
            s = [x for x in data if x[0] == sched]
            rate = [st / dt for _, st, sw, dt in s]
            sw_rate = [sw / dt for _, st, sw, dt in s]
            print(f"{label + ', ' + sched + ', steps/s':44s} {min(rate):10.0f} "
                  f"{statistics.median(rate):10.0f}   switches/s median {statistics.median(sw_rate):.0f}")
    for sched in ():
        s = [x for x in steps if x[0] == sched]
        rate = [st / dt for _, st, sw, dt in s]
        sw_rate = [sw / dt for _, st, sw, dt in s]
        print(f"{'ping-pong 2 ranks, ' + sched + ', steps/s':44s} {min(rate):10.0f} "
              f"{statistics.median(rate):10.0f}   switches/s median {statistics.median(sw_rate):.0f}")


if __name__ == "__main__":
    main()
