"""Race-detector figures (docs/races.md), measured in one run:

1. detection on the labelled cases of tests/test_races.py: cases found / cases labelled
   racy, false alarms / cases labelled race-free;
2. the slowdown the detector adds, against the same work without it:
   - kernel time inside the ranks (what recording every access and synchronisation
     costs), for ops of the kernel library, median per call of the slowest rank;
   - whole launches (fork, rendezvous, kernels, and the launcher's offline analysis),
     for the labelled cases and for the library ops; the analysis alone is timed too.

    python benchmarks/bench_races.py [--world-size 2] [--iters 3] [--repeat 3] [--ops LIST]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
sys.path.insert(0, HERE)

OPS = ["all_gather", "reduce_scatter", "all_reduce one_shot", "all_reduce ring", "all_to_all",
       "ag_gemm launches=1", "gemm_rs launches=1"]


def _timed_analysis():
    """Wrap sim.race.analyze so the launcher's share of the cost is measured too."""
    from triton_dist.sim import race
    spent = [0.0]
    orig = race.analyze

    def analyze(*a, **k):
        t = time.perf_counter()
        try:
            return orig(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t
    race.analyze = analyze
    return spent


def _measure(fn, args, iters):
    """(wall seconds, CPU seconds of this rank's process) per call, medians over iters."""
    import triton_dist
    fn(*args)                              # warm-up: workspaces
    wall, cpu = [], []
    for _ in range(iters):
        triton_dist.barrier()
        t, c = time.perf_counter(), time.process_time()
        fn(*args)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - t)
    return statistics.median(wall), statistics.median(cpu)


def ops_rank(names, iters):
    """Rank body: {op: (wall, cpu) seconds per call} (kernel time only, launch excluded)."""
    import torch
    import triton_dist
    from triton_dist import kernels
    import bench_kernels as BK
    r, n = triton_dist.rank(), triton_dist.world_size()
    torch.manual_seed(r)
    out = {}
    for name in names:
        args = BK.SHAPES[name][1](r, n, torch.float32, torch)
        out[name] = _measure(BK._ours(name), args, iters)
    kernels.free_workspaces()
    return out


def detection():
    import triton_dist
    import test_races as T
    found = alarms = racy = clean = 0
    t_off = t_on = 0.0
    misses = []
    for name, (body, labelled_racy, opts) in T.CASES.items():
        t = time.perf_counter()
        triton_dist.launch(body, world_size=2, timeout=60, **opts)
        t_off += time.perf_counter() - t
        t = time.perf_counter()
        res = triton_dist.launch(body, world_size=2, timeout=60, race_check="report", **opts)
        t_on += time.perf_counter() - t
        if labelled_racy:
            racy += 1
            found += bool(res.races)
        else:
            clean += 1
            alarms += bool(res.races)
        if bool(res.races) != labelled_racy:
            misses.append(name)
    return found, racy, alarms, clean, t_off, t_on, misses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3, help="alternating off/on launches")
    p.add_argument("--ops", default=",".join(OPS))
    args = p.parse_args(argv)
    names = [s.strip() for s in args.ops.split(",") if s.strip()]
    import triton_dist
    spent = _timed_analysis()

    found, racy, alarms, clean, t_off, t_on, misses = detection()
    analysis_cases = spent[0]
    print(f"labelled cases (tests/test_races.py, 2 ranks): found {found}/{racy} racy cases "
          f"({100 * found / racy:.0f}%), false alarms {alarms}/{clean} race-free cases "
          f"({100 * alarms / clean:.0f}%)" + (f"; wrong: {', '.join(misses)}" if misses else ""))
    print(f"  whole launches: {t_off / (racy + clean):.3f} s without, {t_on / (racy + clean):.3f} s with the "
          f"detector per case (x{t_on / t_off:.2f}); analysis {analysis_cases / (racy + clean) * 1000:.1f} ms per case")

    spent[0] = 0.0
    runs = {False: [], "report": []}
    launch_s = {False: 0.0, "report": 0.0}
    races = 0
    for _ in range(args.repeat):           # alternate, so a busy machine weighs on both alike
        for mode in (False, "report"):
            t = time.perf_counter()
            res = triton_dist.launch(ops_rank, names, args.iters, world_size=args.world_size, timeout=600,
                                     race_check=mode)
            launch_s[mode] += time.perf_counter() - t
            runs[mode].append(res.values)
            races += len(res.races)

    def per_call(mode, name, k):
        # per repeat: the slowest rank (wall) or the sum over ranks (CPU); then the median
        return statistics.median((max if k == 0 else sum)(v[name][k] for v in vals) for vals in runs[mode])
    print(f"\nkernel library on {args.world_size} ranks, float32, seconds per call (kernel time only; "
          f"median of {args.repeat} alternating launches x {args.iters} calls):")
    print(f"{'op':22s} {'wall off':>9s} {'wall on':>9s} {'ratio':>6s}   {'CPU off':>9s} {'CPU on':>9s} {'ratio':>6s}")
    wr, cr = [], []
    for name in names:
        a, b = per_call(False, name, 0), per_call("report", name, 0)
        c, d = per_call(False, name, 1), per_call("report", name, 1)
        wr.append(b / a)
        cr.append(d / c)
        print(f"{name:22s} {a:9.4f} {b:9.4f} {b / a:5.2f}x   {c:9.4f} {d:9.4f} {d / c:5.2f}x")
    print(f"{'geometric mean':22s} {'':9s} {'':9s} {statistics.geometric_mean(wr):5.2f}x   {'':9s} {'':9s} "
          f"{statistics.geometric_mean(cr):5.2f}x")
    off, on = launch_s[False] / args.repeat, launch_s["report"] / args.repeat
    print(f"whole launch ({len(names)} ops x {args.iters + 1} calls): {off:.2f} s without, {on:.2f} s with "
          f"(x{on / off:.2f}), of which the launcher's analysis {spent[0] / args.repeat:.2f} s; races found: {races}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
