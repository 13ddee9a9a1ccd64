"""The `triton-dist` command: the front; the subcommands come from the backends.

    triton-dist run -n 4 script.py [args]             (also explore, replay: sim/cli.py)
    triton-dist lower path/to/file.py::kernel --signature sig=*i32,buf=*fp32 [--constexpr N=16]
                                                      (backend_ascend/cli.py)

Each subcommand is a `Subcommand`: a function that adds its arguments to its argparse
subparser, and a handler `handler(args) -> int` (the exit status), registered under the
entry-point group `triton_dist.subcommands` (triton_dist/registry.py), so a backend adds
its own without touching this file.  A handler reports a user mistake by raising CliError
(or TritonDistError); main() prints it as one short line and exits with status 2, without
a traceback.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Callable

PROG = "triton-dist"


class CliError(Exception):
    """A bad argument: printed as `triton-dist <cmd>: error: <message>`, exit status 2."""


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]
    order: int = 100          # position in `triton-dist --help`


# --- shared helpers --------------------------------------------------------------------------

def load_target(spec: str):
    """'path/to/file.py::name' -> the object `name` defined by that file (the file is run)."""
    if "::" not in spec:
        raise CliError(f"expected FILE.py::NAME (e.g. kernels.py::allgather), got {spec!r}")
    path, name = spec.rsplit("::", 1)
    if not path or not name:
        raise CliError(f"expected FILE.py::NAME (e.g. kernels.py::allgather), got {spec!r}")
    if not os.path.isfile(path):
        raise CliError(f"no such file: {path}")
    mod_name = "_triton_dist_cli_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    spec_ = importlib.util.spec_from_file_location(mod_name, path)
    if spec_ is None or spec_.loader is None:
        raise CliError(f"cannot load {path} as Python (is it a .py file?)")
    module = importlib.util.module_from_spec(spec_)
    sys.modules[mod_name] = module
    directory = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, directory)
    try:
        spec_.loader.exec_module(module)
    except SystemExit as e:
        raise CliError(f"{path} exited while being loaded (status {e.code})") from None
    except Exception as e:  # noqa: BLE001 - any error in the user's file is reported, not raised
        raise CliError(f"loading {path} failed: {type(e).__name__}: {e}") from None
    finally:
        if sys.path and sys.path[0] == directory:
            sys.path.pop(0)
    if not hasattr(module, name):
        known = sorted(k for k, v in vars(module).items() if _is_kernel(v))
        hint = f"; kernels in it: {', '.join(known)}" if known else ""
        raise CliError(f"{path} defines no {name!r}{hint}")
    return getattr(module, name)


def _is_kernel(obj) -> bool:
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction
    return isinstance(obj, (JITFunction, interpreter.InterpretedFunction))


def parse_assignments(items, what, example):
    """['a=1,b=2', 'c=3'] -> {'a': '1', 'b': '2', 'c': '3'}; each name given once."""
    out = {}
    for item in items or []:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, value = part.partition("=")
            name, value = name.strip(), value.strip()
            if not sep or not name.isidentifier() or not value:
                raise CliError(f"{what}: expected NAME=VALUE (e.g. {example}), got {part!r}")
            if name in out:
                raise CliError(f"{what}: {name} is given twice")
            out[name] = value
    return out


def constexpr_value(text: str):
    """'16' -> 16, '1.5' -> 1.5, 'True' -> True; anything else stays a string."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, (int, float, bool, str)) else text


# --- entry point ----------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Triton-distributed for Ascend NPUs, "
                                     "with a CPU simulator of the NPU.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    from . import registry
    for cmd in registry.subcommands():
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.configure(p)
        p.set_defaults(_handler=cmd.handler, _parser=p)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)            # exits with status 2 on a usage error
    from triton_dist.errors import TritonDistError
    try:
        return int(args._handler(args) or 0)
    except (CliError, TritonDistError) as e:
        args._parser.exit(2, f"{PROG} {args.command}: error: {e}\n")
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # `python -m triton_dist.cli`: this file runs as __main__, a second copy of the module whose
    # CliError is not the one the subcommands raise (they import triton_dist.cli): run the
    # imported module's main, so a user mistake is one line and exit 2, not a traceback
    from triton_dist.cli import main as _main
    sys.exit(_main())
