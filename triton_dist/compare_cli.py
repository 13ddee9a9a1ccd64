"""`triton-dist compare -n N --backends sim,cuda script.py [args]`: a script on several backends,
what its ranks return compared (triton_dist/testing.py).

Each backend runs the script as N ranks (triton_dist.launch of the script as __main__, RANK
and WORLD_SIZE set, as `triton-dist run` and torchrun do).  What a rank returns is what the
script's `main_or_launch(main)` got from `main()` there (the usual end of a triton_dist
script); the values are compared rank by rank with the tolerances of `testing.compare`, and
the first difference is printed with rank, place, index and both values (exit status 1).
A script that returns nothing to compare is refused (exit status 2).
"""
from __future__ import annotations

import os
import runpy
import sys

from .cli import CliError, Subcommand


class ScriptFailed(Exception):
    """The script exited with a non-zero status."""


def run_script(path: str, argv: list) -> None:
    """The script as __main__ in this process (a rank), with `argv` as its arguments."""
    sys.argv = [path] + list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            raise ScriptFailed(f"{os.path.basename(path)} exited with status {e.code}") from None


def script_values(path: str, argv: list) -> list:
    """Body of one rank: run the script; the values its main_or_launch calls got from main()."""
    from . import launcher
    values: list = []
    launcher.MAIN_VALUES.append(values)
    try:
        run_script(path, argv)
    finally:
        launcher.MAIN_VALUES.remove(values)
    return values


def _configure(p) -> None:
    p.add_argument("-n", "--nproc", type=int, required=True, metavar="N", help="number of ranks")
    p.add_argument("--backends", default="sim,cuda", metavar="A,B",
                   help="the backends to run the script on, compared against the first (default sim,cuda)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds each run may take")
    p.add_argument("--rtol", type=float, default=None, help="relative tolerance for floating values "
                                                            "(default: per dtype, as torch.testing)")
    p.add_argument("--atol", type=float, default=None, help="absolute tolerance for floating values")
    p.add_argument("script", help="the Python script every rank runs")
    p.add_argument("args", nargs="*", help="arguments of the script (after --)")


def _compare(args) -> int:
    from . import launcher, registry
    from .errors import LAUNCH_FAILURES
    from .testing import BackendsDisagree, check_values
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    if len(names) < 2 or len(set(names)) != len(names):
        raise CliError(f"--backends needs at least two different backends, e.g. sim,cuda; got {args.backends!r}")
    unknown = [b for b in names if b not in registry.backend_names()]
    if unknown:
        raise CliError(f"--backends: unknown backend(s) {', '.join(unknown)}; registered: "
                       f"{', '.join(registry.backend_names())}")
    if not os.path.isfile(args.script):
        raise CliError(f"no such file: {args.script}")
    from .testing import check_tolerances
    check_tolerances(args.rtol, args.atol, "triton-dist compare")     # a negative --rtol: refused before running
    if not 1 <= args.nproc <= launcher.MAX_WORLD_SIZE:
        raise CliError(f"-n must be between 1 and {launcher.MAX_WORLD_SIZE}, got {args.nproc}")
    for name in names:
        need = registry.backend_class(name).missing()
        if need:
            raise CliError(f"backend {name!r} cannot run here: it needs {', '.join(need)}")
    results = {}
    for name in names:
        launcher.warm_for_script(args.script, name)      # the ranks fork warm
        try:
            results[name] = launcher.launch(script_values, args.script, list(args.args), world_size=args.nproc,
                                            backend=name, timeout=args.timeout)
        except LAUNCH_FAILURES as e:
            print(f"triton-dist compare: the run on {name!r} failed:\n{e}", file=sys.stderr)
            return 1
        print(f"triton-dist compare: {args.nproc} ranks on {name!r} finished in "
              f"{results[name].wall_seconds:.2f} s", file=sys.stderr)
    first = results[names[0]].values
    if not any(first):
        raise CliError(f"{args.script} returned nothing to compare: end it with "
                       f"`sys.exit(triton_dist.main_or_launch(main))` where main() returns the values to compare")
    for name in names[1:]:
        try:
            check_values(first, results[name].values, (names[0], name), rtol=args.rtol, atol=args.atol)
        except BackendsDisagree as e:
            print(f"triton-dist compare: {e}", file=sys.stderr)
            return 1
    print(f"triton-dist compare: {', '.join(names)} agree on what the {args.nproc} ranks of "
          f"{os.path.basename(args.script)} returned", file=sys.stderr)
    return 0


COMPARE = Subcommand("compare", "run a script on several backends and compare what its ranks return",
                     _configure, _compare, order=40)
