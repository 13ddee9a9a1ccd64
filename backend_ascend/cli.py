"""`triton-dist lower`: print a kernel's TTIR after the HIVM lowering of its distributed ops.

Registered into `triton-dist` by this backend (pyproject.toml, entry-point group
triton_dist.subcommands).  Runs on any machine: the lowering needs no NPU.
"""
from __future__ import annotations

import argparse
import sys

from triton_dist.cli import Subcommand, constexpr_value, load_target, parse_assignments


def _configure_lower(p: argparse.ArgumentParser):
    p.add_argument("kernel", metavar="FILE.py::KERNEL", help="the @triton.jit kernel to lower")
    p.add_argument("--signature", "-s", action="append", required=True, metavar="NAME=TYPE,...",
                   help="Triton types of the non-constexpr parameters, e.g. sig=*i32,buf=*fp32,n=i32")
    p.add_argument("--constexpr", "-c", action="append", default=[], metavar="NAME=VALUE,...",
                   help="values of the tl.constexpr parameters, e.g. BLOCK=16")
    p.add_argument("--debug-info", action="store_true", help="keep source locations in the output")


def _lower(args) -> int:
    signature = parse_assignments(args.signature, "--signature", "sig=*i32,buf=*fp32")
    constexprs = {k: constexpr_value(v) for k, v in
                  parse_assignments(args.constexpr, "--constexpr", "BLOCK=16").items()}
    kernel = load_target(args.kernel)
    from . import lower
    sys.stdout.write(lower(kernel, signature, constexprs, debug_info=args.debug_info).rstrip("\n") + "\n")
    return 0


LOWER = Subcommand("lower", "print a kernel's TTIR after the HIVM lowering of its distributed ops "
                   "(runs on any machine)", _configure_lower, _lower, order=40)
