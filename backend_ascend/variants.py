"""What `triton-dist npu-compile` compiles for an @triton.autotune / @triton.heuristics kernel.

A launch of an autotuned kernel compiles the kernel once per config (Triton's Autotuner.run
hands each config's kwargs to the JITFunction), and a heuristics kernel with the constexprs
its functions compute (Triton's Heuristics.run).  `variants()` unwraps those layers, outer to
inner, into one compile per config:

- a config's kwargs that name a kernel parameter are constexprs; those that name a compile
  option of triton-ascend (pipeline.OPTION_FLAGS, e.g. `multibuffer`, which triton-ascend's
  own AutoTilingTuner puts in kwargs: third_party/ascend/backend/runtime/autotuner.py:146-166
  at a84b1eb5) are compile options; num_warps, num_stages, num_ctas and maxnreg are GPU fields
  and are not passed (triton-ascend reads num_warps in SIMT mode only, same file :127-143);
- `prune_configs_by` is not applied: its functions take the launch's arguments, which a
  compile from the command line does not have; every config is compiled;
- a heuristic is called with the constexprs known at that point (the --constexpr values and
  the config's kwargs); one that reads an argument known only by its type (a pointer, a
  runtime int) is refused, asking for its value with --constexpr NAME=VALUE, and a value
  given with --constexpr is used as it is.

On an NPU, triton-ascend's autotuner drops a config that fails to compile and tunes among the
others (autotuner.py:471-495 at a84b1eb5: CompileTimeAssertionFailure, MLIRCompilationError,
OutOfResources are caught; "No valid triton configs" only when none compiles): a refused
config never runs there, which is why each is reported.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from triton_dist.errors import TritonDistError


@dataclass
class Variant:
    label: str                      # "configs[1] (BLOCK=65536)", "" for a plain kernel
    kernel: object                  # the JITFunction (or function) to compile
    constexprs: dict
    options: dict = field(default_factory=dict)


def _layers():
    from triton.runtime.autotuner import Autotuner, Heuristics
    return Autotuner, Heuristics


def is_tuned(obj) -> bool:
    Autotuner, Heuristics = _layers()
    return isinstance(obj, (Autotuner, Heuristics))


def _parameters(obj) -> list:
    names = getattr(obj, "arg_names", None)        # Autotuner, Heuristics and JITFunction keep them
    if names is not None:
        return list(names)
    import inspect
    return list(inspect.signature(getattr(obj, "fn", obj)).parameters)


def describe(config, i) -> str:
    parts = [f"{k}={v!r}" for k, v in config.kwargs.items()]
    for name, default in (("num_warps", 4), ("num_stages", 3), ("num_ctas", 1), ("maxnreg", None)):
        value = getattr(config, name, default)
        if value != default:
            parts.append(f"{name}={value!r}")
    return f"configs[{i}] ({', '.join(parts) or 'no kwargs'})"


class _Known(dict):
    """The argument dict a heuristic reads: a name known only by its type is refused, naming it."""

    def __init__(self, known, typed, target, kernel):
        super().__init__(known)
        self.typed, self.target, self.kernel = typed, target, kernel

    def __missing__(self, name):
        if name in self.typed:
            what = f"known here only by its type ({self.typed[name]})"
        else:
            what = "not given"
        raise TritonDistError(
            f"the @triton.heuristics function of {self.target!r} (kernel {self.kernel}) reads argument {name!r}, "
            f"{what}: a compile from the command line has no argument values.  Give the heuristic's value instead, "
            f"with --constexpr {self.target}=VALUE")


def variants(obj, signature, constexprs, options=None) -> list:
    """One Variant per compile the launch of `obj` makes (a plain kernel: one, unlabelled)."""
    from .pipeline import OPTION_FLAGS
    Autotuner, Heuristics = _layers()
    if not is_tuned(obj):          # a plain kernel (or whatever the frontend then refuses, in its words)
        return [Variant("", obj, dict(constexprs or {}), dict(options or {}))]
    params = _parameters(obj)
    inner = obj
    while is_tuned(inner):
        inner = inner.fn
    kernel_name = getattr(inner, "__name__", None) or getattr(getattr(inner, "fn", None), "__name__", "kernel")
    todo = [Variant("", obj, dict(constexprs or {}), dict(options or {}))]
    while isinstance(todo[0].kernel, (Autotuner, Heuristics)):
        layer = todo[0].kernel
        out = []
        for v in todo:
            if isinstance(layer, Autotuner):
                for i, config in enumerate(layer.configs):
                    cx, opts = dict(v.constexprs), dict(v.options)
                    for k, value in config.kwargs.items():
                        if k in params:
                            if k in constexprs:
                                raise TritonDistError(
                                    f"--constexpr {k}=... is set by the autotuner's configs of kernel {kernel_name} "
                                    f"({describe(config, i)}); leave it out (Triton refuses a launch that sets it "
                                    f"too: 'Conflicting meta-parameters')")
                            cx[k] = value
                        elif k in OPTION_FLAGS:
                            opts.setdefault(k, value)
                        else:
                            raise TritonDistError(
                                f"{describe(config, i)} of kernel {kernel_name} sets {k!r}, which is neither a "
                                f"parameter of the kernel ({', '.join(params)}) nor a triton-ascend compile option "
                                f"({', '.join(OPTION_FLAGS)})")
                    label = " ".join(x for x in (v.label, describe(config, i)) if x)
                    out.append(Variant(label, layer.fn, cx, opts))
            else:
                cx = dict(v.constexprs)
                for name, heuristic in layer.values.items():
                    if name in constexprs:
                        continue             # given on the command line: used as it is
                    cx[name] = heuristic(_Known(cx, signature, name, kernel_name))
                out.append(Variant(v.label, layer.fn, cx, v.options))
        todo = out
    return todo
