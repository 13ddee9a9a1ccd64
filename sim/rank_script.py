"""A user's script as the body of every simulated rank, and the command-line handling that
each subcommand running one shares: run, explore and replay (sim/cli.py), predict
(sim/predict/cli.py).  It lives below both fronts so that predict's does not import the
other's (they were one import cycle with sim/launch.py, which imports predict).
"""
from __future__ import annotations

import argparse
import os
import sys

from triton_dist.compare_cli import run_script as core_run_script


def run_script(path: str, argv: list, shmem_compat: bool = False):
    """Body of one rank: the script as __main__ (with upstream's host packages mapped onto the
    simulator first, if asked: sim/compat/npu.py)."""
    if shmem_compat:
        from .compat import npu
        npu.install()
    core_run_script(path, argv)


def split_at_dashdash(p: argparse.ArgumentParser) -> None:
    """`... script.py --seed 3 -- a --b`: everything after the first `--` is the script's.
    argparse alone cannot do it: it fills the `args` positional (empty) together with the
    script, then refuses what follows `--`.  The subparser is handed its own arguments
    through parse_known_args, so the split happens there."""
    parse = p.parse_known_args

    def parse_known_args(args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        rest = []
        if "--" in args:
            i = args.index("--")
            args, rest = args[:i], args[i + 1:]
        ns, extra = parse(args, namespace)
        ns.args = list(getattr(ns, "args", None) or []) + rest
        return ns, extra
    p.parse_known_args = parse_known_args


def check(args):
    """The script exists, -n is in range, and --shmem-compat shadows no real shmem / torch_npu."""
    from triton_dist.cli import CliError
    if not os.path.isfile(args.script):
        raise CliError(f"no such file: {args.script}")
    if not 1 <= args.nproc <= 64:
        raise CliError(f"-n must be between 1 and 64, got {args.nproc}")
    if getattr(args, "shmem_compat", False):
        from .compat import npu
        for name in ("shmem", "torch_npu"):
            if npu._real(name):
                raise CliError(f"--shmem-compat: a real {name!r} is installed here and would be shadowed; run the "
                               f"script on the NPU, or simulate it from an environment without {name}")


def warm(path: str) -> None:
    """Before the first launch of a script: its ranks fork warm (triton_dist/launcher.py)."""
    from triton_dist import launcher
    launcher.warm_for_script(path)
