"""`triton-dist lower`: print a kernel's TTIR after the HIVM lowering of its distributed ops.

Registered into `triton-dist` by this backend (pyproject.toml, entry-point group
triton_dist.subcommands).  Runs on any machine: the lowering needs no NPU.
"""
from __future__ import annotations

import argparse
import os
import sys

from triton_dist.cli import CliError, Subcommand, constexpr_value, load_target, parse_assignments


def _configure_kernel(p: argparse.ArgumentParser, what: str):
    compile_ = what == "compile"        # npu-compile --target list needs no kernel
    p.add_argument("kernel", metavar="FILE.py::KERNEL", nargs="?" if compile_ else None,
                   help=f"the @triton.jit kernel to {what}" + (" (an @triton.autotune kernel: every config; "
                                                               "@triton.heuristics: its computed constexprs)"
                                                               if what == "compile" else ""))
    p.add_argument("--signature", "-s", action="append", required=not compile_, metavar="NAME=TYPE,...",
                   help="Triton types of the non-constexpr parameters, e.g. sig=*i32,buf=*fp32,n=i32")
    p.add_argument("--constexpr", "-c", action="append", default=[], metavar="NAME=VALUE,...",
                   help="values of the tl.constexpr parameters, e.g. BLOCK=16")


def _configure_lower(p: argparse.ArgumentParser):
    _configure_kernel(p, "lower")
    p.add_argument("--debug-info", action="store_true", help="keep source locations in the output")


def _lower(args) -> int:
    signature = parse_assignments(args.signature, "--signature", "sig=*i32,buf=*fp32")
    raw_constexprs = parse_assignments(args.constexpr, "--constexpr", "BLOCK=16")
    kernel = _load_kernel(args.kernel)
    constexprs = _kernel_constexprs(raw_constexprs, kernel, args.kernel)
    from triton_dist.language import block_pointers
    block_pointers.install()
    from . import lower
    from .variants import variants
    # an @triton.autotune kernel: every config's module, each under a line naming it (variants.py)
    for v in variants(kernel, signature, constexprs):
        if v.label:
            sys.stdout.write(f"// {v.label}\n")
        sys.stdout.write(lower(v.kernel, signature, v.constexprs, debug_info=args.debug_info).rstrip("\n") + "\n")
    return 0


LOWER = Subcommand("lower", "print a kernel's TTIR after the HIVM lowering of its distributed ops "
                   "(runs on any machine)", _configure_lower, _lower, order=40)


# --- triton-dist npu-compile ---------------------------------------------------------------------------------
def _configure_npu_compile(p: argparse.ArgumentParser):
    _configure_kernel(p, "compile")
    p.add_argument("--target", default=None, metavar="T[,T...]",
                   help="the NPU chip(s) to compile for, each a --target value of the installed bishengir-compile "
                        "(default Ascend910B4: Atlas A2); a comma list compiles for each in turn; "
                        "'--target list' prints the chips it knows with their Unified Buffer sizes"),
    p.add_argument("--keep", default=None, metavar="DIR",
                   help="keep every stage's IR and log in DIR (kernel.ttir.mlir, kernel.ttadapter.mlir, "
                        "kernel.convert-hivm-to-std.mlir, ...)")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE,...",
                   help="triton-ascend compile options that change bishengir-compile's flags, e.g. multibuffer=False")
    p.add_argument("--lint", action="store_true",
                   help="also report performance cliffs the compiled module shows (backend_ascend/lint.py: grid "
                        "against the cores with --grid, scalar loops, padded tail axes), each with its fix; a "
                        "report only: the exit status is the compilers' verdict")
    p.add_argument("--grid", default=None, metavar="G[,G,G]",
                   help="with --lint: the launch grid, judged against the target's physical cores")


def _kernel_constexprs(raw: dict, kernel, spec: str) -> dict:
    """--constexpr values: a Python literal (16, 1.5, True, 'text'), or the name of a @triton.jit function
    of the kernel's file (ACT=act, as a launch passes ACT=act).  A bare word that is neither is refused
    naming the constexpr (the frontend would fail on it far from the cause: "'str' object has no
    attribute 'dtype'")."""
    from .source_key import _unwrap
    base = _unwrap(kernel)
    module = sys.modules.get(getattr(base, "__module__", ""), None)
    out = {}
    for name, text in raw.items():
        value = constexpr_value(text)
        quoted = text[:1] in "'\"" and text[-1:] == text[:1] and len(text) >= 2
        if isinstance(value, str) and not quoted:
            member = getattr(module, text, None) if text.isidentifier() else None
            if member is not None and _is_jit(member):
                value = member
            else:
                raise CliError(f"--constexpr {name}={text}: {text!r} is not a number, a bool, a quoted string or a "
                               f"@triton.jit function of {spec.rsplit('::', 1)[0]}; give e.g. {name}=16, "
                               f"{name}=True, {name}=\"'{text}'\" for the string, or the name of a @triton.jit "
                               f"function defined in that file")
        out[name] = value
    return out


def _load_kernel(spec: str):
    kernel = load_target(spec)
    if not _is_jit(kernel):
        raise CliError(f"{spec}: expected a @triton.jit kernel (or an @triton.autotune / @triton.heuristics one), "
                       f"got {type(kernel).__name__} {getattr(kernel, '__name__', '')!s}; decorate it with @triton.jit")
    return kernel


def _is_jit(obj) -> bool:
    from triton_dist.cli import _is_kernel
    from .variants import is_tuned
    return _is_kernel(obj) or is_tuned(obj)


# npu-compile's exit statuses (its --help lists them): 0 accepted, 1 refused by the compilers, 2 no
# verdict (a wrong argument, target or path; a kernel that cannot be lowered; a compiler that could
# not run), 3 the compilers are not on this machine (install them; nothing is wrong with the command)
TOOLS_MISSING = 3


def _tools_missing(e) -> int:
    sys.stderr.write(f"triton-dist npu-compile: the NPU compilers are not here (exit {TOOLS_MISSING}): {e}\n")
    return TOOLS_MISSING


def _list_targets() -> int:
    """The chips the installed bishengir-compile takes (its own --help), each with its Unified Buffer."""
    from . import pipeline, targets, toolchain
    tools = toolchain.find()
    if tools.compiler is None:
        return _tools_missing(f"no bishengir-compile to ask for its targets: {tools.compiler_why}")
    known = pipeline.known_targets(tools.compiler)
    if not known:
        raise CliError(f"{tools.compiler} --help lists no --target values; check the tool "
                       f"(`python -m triton_dist.backend_ascend.toolchain find`)")
    sys.stdout.write(f"{tools.compiler} takes --target (default {pipeline.DEFAULT_TARGET}):\n"
                     + targets.listing(known) + "\n")
    return 0


def _npu_compile(args) -> int:
    from . import pipeline
    from .variants import is_tuned, variants
    if (args.target or "").strip() == "list":
        return _list_targets()
    if not args.kernel or not args.signature:
        raise CliError("npu-compile needs a kernel FILE.py::KERNEL and --signature NAME=TYPE,... "
                       "(or --target list alone, to list the chips)")
    if args.grid is not None and not args.lint:
        raise CliError("--grid is judged by --lint only: add --lint, or leave --grid out")
    chips = pipeline.targets_of(args.target)
    if len(chips) > 1:              # each chip in turn; every target is checked before anything is compiled
        return _for_each_target(args, chips)
    signature = parse_assignments(args.signature, "--signature", "sig=*i32,buf=*fp32")
    raw_constexprs = parse_assignments(args.constexpr, "--constexpr", "BLOCK=16")
    options = {k: constexpr_value(v) for k, v in
               parse_assignments(args.option, "--option", "multibuffer=False").items()}
    kernel = _load_kernel(args.kernel)
    constexprs = _kernel_constexprs(raw_constexprs, kernel, args.kernel)
    from triton_dist.language import block_pointers
    block_pointers.install()        # on a triton without them: a refusal naming the lines that have them
    target = chips[0]
    todo = variants(kernel, signature, constexprs, options)
    if not is_tuned(kernel):
        try:
            if args.lint:
                from . import lint
                out, findings = lint.lint_kernel(kernel, signature, constexprs, grid=_grid(args.grid), target=target,
                                                 options=options, keep=args.keep)
            else:
                out = pipeline.compile_kernel(kernel, signature, constexprs, target=target, options=options,
                                              keep=args.keep)
        except pipeline.ToolsMissing as e:
            return _tools_missing(e)
        _print_outcome(out, args.keep)
        if args.lint:
            sys.stdout.write(lint.report(out.kernel, findings) or f"lint: kernel {out.kernel}: no finding")
            sys.stdout.write("\n")
        return 0 if out.accepted else 1
    # an @triton.autotune / @triton.heuristics kernel: every compile its launches make (variants.py)
    from triton_dist.errors import TritonDistError
    refused, unlowered = [], []
    for i, v in enumerate(todo):
        keep = None if not args.keep else (args.keep if len(todo) == 1 else os.path.join(args.keep, f"config{i}"))
        head = f"{v.label}: " if v.label else ""
        try:
            findings = None
            if args.lint:
                from . import lint
                out, findings = lint.lint_kernel(v.kernel, signature, v.constexprs, grid=_grid(args.grid),
                                                 target=target, options=v.options, keep=keep)
            else:
                out = pipeline.compile_kernel(v.kernel, signature, v.constexprs, target=target, options=v.options,
                                              keep=keep)
        except pipeline.ToolsMissing as e:
            return _tools_missing(e)
        except TritonDistError as e:        # no verdict for this config (cannot lower, the frontend refuses it)
            unlowered.append(v.label or str(i))
            sys.stdout.write(f"{head}no verdict\n" + "".join(f"  {line}\n" for line in str(e).splitlines()))
            continue
        if out.accepted:
            sys.stdout.write(f"{head}accepted: kernel {out.kernel} ({out.signature_text()})\n"
                             f"  stage reached: {out.stage}\n")
        else:
            refused.append(v.label or out.kernel)
            sys.stdout.write(f"{head}refused\n" + "".join(f"  {line}\n" for line in out.report().splitlines()))
        if findings is not None:
            sys.stdout.write("".join(f"  {line}\n" for line in
                                     (lint.report(out.kernel, findings) or f"lint: kernel {out.kernel}: no finding")
                                     .splitlines()))
    if len(todo) > 1:
        sys.stdout.write(f"{len(todo) - len(refused) - len(unlowered)} of {len(todo)} configs accepted"
                         + (f"; refused: {'; '.join(refused)} (triton-ascend's autotuner drops a config that fails "
                            f"to compile and tunes among the others; it fails only when none compiles)"
                            if refused else "")
                         + (f"; no verdict: {'; '.join(unlowered)}" if unlowered else "") + "\n")
    if args.keep:
        sys.stdout.write(f"stages kept in {args.keep}\n")
    # 1: the compilers refused a config; 2: no verdict for some config (and none refused)
    return 1 if refused else 2 if unlowered else 0


def _grid(text):
    """--grid 4096 or 8,16,1 as a tuple of positive ints (None when not given)."""
    if text is None:
        return None
    try:
        grid = tuple(int(g) for g in text.split(","))
    except ValueError:
        grid = ()
    if not grid or len(grid) > 3 or min(grid) < 1:
        raise CliError(f"--grid {text}: give 1 to 3 positive integers, e.g. --grid 4096 or --grid 8,16")
    return grid


def _for_each_target(args, chips) -> int:
    """npu-compile --target A,B: the kernel compiled for each chip under a line naming it (its Unified
    Buffer, from AscendNPU-IR's target specs); exit 2 if a target is unknown (before any compile), else
    the worst of the per-chip exits (1 refused anywhere, 2 no verdict somewhere)."""
    import copy
    from . import pipeline, targets, toolchain
    tools = toolchain.find()
    if not tools.missing:
        for chip in chips:
            pipeline.check_target(chip, tools)
    worst = 0
    for chip in chips:
        sys.stdout.write(f"== {targets.describe(chip)}\n")
        one = copy.copy(args)
        one.target = chip
        one.keep = os.path.join(args.keep, chip) if args.keep else None
        sys.stdout.flush()
        rc = _npu_compile(one)
        worst = rc if (rc == 1 or worst == 0) else worst
    return worst


def _print_outcome(out, keep) -> None:
    if not out.accepted:
        sys.stdout.write(out.report() + "\n")
        return
    sys.stdout.write(f"accepted: kernel {out.kernel} ({out.signature_text()})\n"
                     f"stage reached: {out.stage}\n")
    if out.symbols:
        sys.stdout.write("aclshmem calls:\n" + "".join(f"{s}\n" for s in out.symbols))
    if keep:
        sys.stdout.write(f"stages kept in {keep}\n")


NPU_COMPILE = Subcommand("npu-compile", "compile a kernel with the real NPU compilers (triton-ascend's "
                         "triton-adapter-opt, AscendNPU-IR's bishengir-compile) up to hivmc.  Exit status: 0 accepted; "
                         "1 refused by the compilers; 2 no verdict: a wrong argument, target or path, a kernel "
                         "that cannot be lowered, or a compiler that could not run; 3 the compilers are not "
                         "installed here (scripts/setup.sh installs them)", _configure_npu_compile, _npu_compile, order=41)
