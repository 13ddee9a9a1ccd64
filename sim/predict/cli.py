"""`triton-dist predict`: run a script on simulated ranks and predict its kernels' times on a device.

    triton-dist predict -n 4 --device atlas-a2 script.py [--trace out.json] [-- script args]
    triton-dist predict -n 4 --device atlas-a2 a.py --compare b.py     # two variants, side by side
    triton-dist predict -n 2 --device atlas-a2 --shmem-compat upstream_tutorial.py

Prints one table per script (each launch: predicted us, per rank, busiest pipe, time
waiting) and the critical path of the longest launch; --trace writes a Perfetto trace whose
clock is the predicted time.  The run itself is an ordinary simulator run (free schedule).
"""
from __future__ import annotations

import sys

from triton_dist.errors import LAUNCH_FAILURES


def configure(p):
    from ..rank_script import split_at_dashdash
    from .profile import known
    p.add_argument("-n", "--nproc", type=int, required=True, metavar="N", help="number of ranks")
    p.add_argument("--device", required=True, help=f"device profile: {', '.join(known())}, or a profile JSON path")
    p.add_argument("--compare", metavar="OTHER.py", help="a second variant: predict both, print the difference")
    p.add_argument("--trace", metavar="OUT.json", help="Perfetto trace on the predicted clock (of the first script)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before a run is declared stuck")
    p.add_argument("--shmem-compat", action="store_true",
                   help="run upstream Ascend host code as written (as `triton-dist run --shmem-compat`)")
    p.add_argument("script", help="the Python script every rank runs")
    p.add_argument("args", nargs="*", help="arguments of the script(s) (after --)")
    split_at_dashdash(p)


def _predict(path, args):
    import os

    import triton_dist
    from triton_dist.cli import CliError

    from ..rank_script import check, run_script, warm
    if not os.path.isfile(path):
        raise CliError(f"no such file: {path}")
    check(args)           # -n, and --shmem-compat never over a real shmem / torch_npu
    warm(path)            # the ranks fork warm
    res = triton_dist.launch(run_script, path, args.args, args.shmem_compat, world_size=args.nproc,
                             timeout=args.timeout, predict=args.device)
    return res.prediction


def handler(args) -> int:
    import triton_dist
    from triton_dist.errors import TritonDistError

    from . import load
    try:
        load(args.device)
    except TritonDistError as e:
        print(f"triton-dist predict: {e}", file=sys.stderr)
        return 2
    results = []
    for path in [args.script] + ([args.compare] if args.compare else []):
        try:
            pred = _predict(path, args)
        except LAUNCH_FAILURES as e:
            print(str(e), file=sys.stderr)
            return 1
        results.append((path, pred))
        print(f"== {path}")
        print(pred.table())
        if pred.launches:
            longest = max(pred.launches, key=lambda x: x.us)
            print(f"critical path of launch {longest.index} ({longest.kernel}):")
            for seg in longest.critical_path:
                print(f"  {seg}")
    if args.trace and results:
        n = results[0][1].write_trace(args.trace)
        print(f"triton-dist: predicted-time trace ({n} events) written to {args.trace}", file=sys.stderr)
    if len(results) == 2:
        (a, pa), (b, pb) = results
        ta, tb = pa.total_us, pb.total_us
        faster = a if ta < tb else b
        print(f"== compare on {pa.device}: {a} {ta:.1f} us, {b} {tb:.1f} us: {faster} is "
              f"{max(ta, tb) / max(min(ta, tb), 1e-9):.2f}x faster (predicted)")
    return 0


def _make():
    from triton_dist.cli import Subcommand
    return Subcommand("predict", "run a script on simulated ranks and predict its kernels' times on a device",
                      configure, handler, order=40)


PREDICT = _make()
