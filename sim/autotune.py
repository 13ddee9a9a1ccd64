"""@triton.autotune on the simulator: every config runs, and each is checked against one.

Triton's autotuner times each config on the device (`driver.active.get_benchmarker()`); with
no device driver, Triton's own interpreter fails a multi-config autotuner with "0 active
drivers ([]). There should only be one."  There is no time to measure here, but there is
something better to learn: whether every config computes the same thing.  A launch of an
autotuned kernel whose tuning key is new (Triton's key: the values of `key`'s arguments and
the dtypes of the tensor arguments) on the simulator:

1. prunes the configs as Triton does (`prune_configs_by`: early_config_prune, perf_model and
   top_k; Autotuner.prune_configs);
2. runs every config left once, in order, each from the launch's values (every tensor
   argument is put back as the launch gave it) and between Triton's own hooks as its
   benchmark runs them: the config's pre_hook, the autotuner's pre_hook (reset_to_zero zeroes
   its arguments, restore_value keeps copies), the kernel, the post_hook (restore_value puts
   the copies back);
3. copies every tensor argument right after each config's kernel returned: its outputs;
4. compares each config's outputs with the reference config's (the first, or the one
   TRITON_DIST_AUTOTUNE_REFERENCE chooses, docs/api.md) and raises AutotuneMismatch naming
   every config that differs, with its first differing element;
5. keeps the reference as the tuned config of that key (Triton's cache), resets the
   reset_to_zero arguments and launches it once more on what the runs left, as Triton's
   final launch does: what the caller sees is that launch's outputs.  Where they differ
   from the reference's own run (a kernel that updates or accumulates into an argument that
   restore_value / reset_to_zero does not name: on a device, every config runs many times
   before that launch), AutotuneMismatch says which argument to name.
A later launch with the same key runs the tuned config only (Triton tunes once per key).

Choosing the reference: `TRITON_DIST_AUTOTUNE_REFERENCE=N` checks every autotuned kernel
against its configs[N] (the index in its `@triton.autotune(configs=[...])` list, from 0), and
`TRITON_DIST_AUTOTUNE_REFERENCE="matmul_kernel:2;softmax_kernel:1"` chooses per kernel name
(kernels not named keep the first).  The reference is also the config the launch keeps, so
its outputs are what the caller sees; an index out of range, or a reference that
prune_configs_by removes for the launch's arguments, is refused naming the configs.  Set it
in the environment of the process that launches (ranks inherit it; replay lines carry it).
Integers and bools must match exactly; floats within a relative 1e-4 (fp32), 1e-2 (fp16),
3e-2 (bf16), 0.25 (fp8) of the reference, plus that much of the mean magnitude of the
reference tensor (configs split loops and reductions differently, so sums come out in
another order).  The error is `triton_dist.sim.autotune.AutotuneMismatch`, a
TritonDistError; a config that fails (a kernel error) fails the launch with its message
prefixed by `autotuned kernel NAME, configs[i] (BLOCK=...): `.  Under `npu_compile=True` /
`pytest --npu-compile` every config is compiled as it is launched; a config the NPU compilers
refuse is not run, the others are, and the launch then fails with one NpuCompileError naming
every refused config with the compiler's lines (triton-ascend's own autotuner would drop them
silently: third_party/ascend/backend/runtime/autotuner.py:471-495 at a84b1eb5).  @triton.heuristics needs nothing of the
simulator: Triton computes its constexprs before the launch, as on a device.

Which Config fields matter on Ascend (triton-ascend a84b1eb5,
third_party/ascend/backend/runtime/autotuner.py): `kwargs` (its constexprs, and compile
options such as `multibuffer`, which its AutoTilingTuner adds to kwargs itself, lines
146-166); `num_warps` only in SIMT mode (lines 127-143); num_stages, num_ctas, maxnreg are
GPU fields (inferred, not verified, that the NPU compiler ignores them).  The simulator runs
the kernel's constexprs and ignores the rest.
"""
from __future__ import annotations

import os

from triton_dist.errors import TritonDistError

from .kernel_args import tensors_in

REFERENCE_ENV = "TRITON_DIST_AUTOTUNE_REFERENCE"

# How far a config's floating-point outputs may be from the reference's: configs split loops
# and reductions differently, so sums come out in another order.  |got - ref| <= RTOL * |ref|
# + RTOL * mean|ref| (the second term: an element near zero after cancellation).
RTOL = {"torch.float64": 1e-9, "torch.float32": 1e-4, "torch.float16": 1e-2, "torch.bfloat16": 3e-2}
RTOL_FP8 = 0.25


class AutotuneMismatch(TritonDistError):
    """Configs of an autotuned kernel computed different outputs (the message names each)."""


def index_of(configs, config) -> int:
    """Where `config` is in the autotuner's list (-1: a config prune_configs_by made)."""
    for j, c in enumerate(configs):
        if c is config:
            return j
    for j, c in enumerate(configs):
        if c == config:
            return j
    return -1


def describe(configs, i, c=None) -> str:
    """'configs[1] (BLOCK=32, num_warps=8)': where the config is in the autotuner's list and
    what it sets (its kwargs; the GPU fields it sets besides Triton's defaults)."""
    c = configs[i] if c is None else c
    parts = [f"{k}={v!r}" for k, v in c.kwargs.items()]
    for field, default in (("num_warps", 4), ("num_stages", 3), ("num_ctas", 1), ("maxnreg", None)):
        value = getattr(c, field, default)
        if value != default:
            parts.append(f"{field}={value!r}")
    where = f"configs[{i}]" if i >= 0 else "a config made by prune_configs_by"
    return f"{where} ({', '.join(parts) or 'no kwargs'})"


def reference_index(kernel: str, configs) -> int:
    """The index (in the autotuner's configs) of the config the others are checked against:
    TRITON_DIST_AUTOTUNE_REFERENCE = "N" (every autotuned kernel) or "KERNEL:N;KERNEL2:M" (by
    kernel name); 0 when not set for this kernel."""
    raw = os.environ.get(REFERENCE_ENV, "").strip()
    for entry in (e.strip() for e in raw.split(";")):
        if not entry:
            continue
        name, sep, index = entry.rpartition(":")
        if sep and name.strip() != kernel:
            continue
        try:
            i = int(index)
        except ValueError:
            raise TritonDistError(f"{REFERENCE_ENV}={raw!r}: {entry!r} is not N or KERNEL:N (N: the index of a config "
                                  f"in the kernel's @triton.autotune list, from 0); e.g. {REFERENCE_ENV}=1 or "
                                  f"{REFERENCE_ENV}={kernel}:1") from None
        if not 0 <= i < len(configs):
            listed = "; ".join(describe(configs, j) for j in range(len(configs)))
            raise TritonDistError(f"{REFERENCE_ENV}={raw!r} chooses configs[{i}] of kernel {kernel}, which has "
                                  f"{len(configs)} configs: {listed}; choose an index from 0 to {len(configs) - 1}")
        return i
    return 0


def tuning_key(tuner, kwargs) -> tuple:
    """Triton's tuning key (Autotuner.run): the values of `key`'s arguments, then the dtype of
    every argument that has one."""
    given = {k: v for k, v in {**tuner.nargs, **kwargs}.items() if k in tuner.arg_names}
    key = [given[k] for k in tuner.keys if k in given]
    key += [str(v.dtype) for v in given.values() if hasattr(v, "dtype")]
    return tuple(key)


def _tensors(tuner, nargs) -> list:
    """(name, tensor) of every tensor the kernel's arguments reach, in argument order."""
    out = []
    for name, value in nargs.items():
        if name in tuner.arg_names:
            out.extend(tensors_in(name, value))
    return out


def _copies(tensors) -> list:
    return [(name, t.detach().clone()) for name, t in tensors]


def _put_back(tensors, copies) -> None:
    for (_, t), (_, saved) in zip(tensors, copies):
        t.copy_(saved)


def _compare(want, got):
    """(name, index, expected, value, count, numel) of the first tensor that differs, or None."""
    for (name, w), (_, g) in zip(want, got):
        diff = first_difference(w, g)
        if diff is not None:
            return (name, *diff, max(w.numel(), 1))
    return None


def _at(name, index) -> str:
    return f"{name}[{', '.join(map(str, index))}]" if index else name


def _rtol(dtype) -> float:
    name = str(dtype)
    return RTOL.get(name, RTOL_FP8 if "float8" in name else 1e-4)


def first_difference(ref, got):
    """None when `got` matches `ref` (integers and bools exactly; floats within RTOL, NaN where
    the reference has NaN, infinities equal); else (index tuple, reference value, value, how
    many elements differ)."""
    import torch
    if ref.shape != got.shape or ref.dtype != got.dtype:
        return ((), f"{tuple(ref.shape)} {ref.dtype}", f"{tuple(got.shape)} {got.dtype}", max(ref.numel(), 1))
    if ref.dtype.is_floating_point:
        r, g = ref.double(), got.double()
        finite = torch.isfinite(r)
        scale = float(r[finite].abs().mean()) if bool(finite.any()) else 0.0
        rtol = _rtol(ref.dtype)
        close = (g - r).abs() <= rtol * r.abs() + rtol * scale
        same_special = (r == g) | (torch.isnan(r) & torch.isnan(g))
        bad = ~torch.where(finite, close & torch.isfinite(g), same_special)
    elif ref.dtype.is_complex:
        bad = ~torch.isclose(ref, got, rtol=1e-4)
    else:
        bad = ref != got
    count = int(bad.sum())
    if count == 0:
        return None
    flat = int(bad.reshape(-1).nonzero()[0])
    index = tuple(int(i) for i in _unravel(flat, ref.shape))
    return index, ref.reshape(-1)[flat].item(), got.reshape(-1)[flat].item(), count


def _unravel(flat, shape):
    out = []
    for size in reversed(tuple(shape)):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))


def _name_config(e: BaseException, text: str) -> None:
    """Put `text` (which config ran) in front of e's message, keeping its type."""
    message = getattr(e, "message", None)
    if isinstance(message, str):              # the launch errors that keep a message (and a report)
        e.message = text + message
        e.args = (text + str(e.args[0]),) + tuple(e.args[1:]) if e.args and isinstance(e.args[0], str) else e.args
    elif len(e.args) == 1 and isinstance(e.args[0], str):
        e.args = (text + e.args[0],)


def _run_one(tuner, args, kwargs, config, label, hooks):
    """Run one config as Triton's benchmark does (hooks=True: the autotuner's pre_hook and
    post_hook around it) or as its final launch does (hooks=False); the tensors' values right
    after the kernel returned (before the post hook)."""
    current = dict(kwargs, **config.all_kwargs())
    full = {**tuner.nargs, **current}
    if config.pre_hook:
        config.pre_hook(full)
    if hooks:
        tuner.pre_hook(full)
    try:
        tuner.fn.run(*args, **current)
    except Exception as e:
        try:
            if hooks:
                tuner.post_hook(full, exception=e)
        finally:
            _name_config(e, label)
        raise
    outputs = _copies(_tensors(tuner, full))
    if hooks:
        tuner.post_hook(full, exception=None)
    return outputs


def run(tuner, original_run, *args, **kwargs):
    """Autotuner.run on the simulator (see the module doc)."""
    if len(tuner.configs) <= 1:
        return original_run(tuner, *args, **kwargs)
    kernel = tuner.base_fn.__name__
    tuner.nargs = dict(zip(tuner.arg_names, args))
    try:
        key = tuning_key(tuner, kwargs)
        config = tuner.cache.get(key)
        if config is not None:              # tuned for this key already: Triton's final launch only
            tuner.best_config = config
            if config.pre_hook is not None:
                config.pre_hook({**tuner.nargs, **kwargs, **config.all_kwargs()})
            label = f"autotuned kernel {kernel}, {describe(tuner.configs, index_of(tuner.configs, config), config)}: "
            try:
                tuner.fn.run(*args, **kwargs, **config.all_kwargs())
            except Exception as e:
                _name_config(e, label)
                raise
            return None
        config, expected = _tune(tuner, kernel, args, kwargs)
        tuner.cache[key] = tuner.best_config = config
        full = {**tuner.nargs, **kwargs, **config.all_kwargs()}
        tuner.pre_hook(full, reset_only=True)
        where = describe(tuner.configs, index_of(tuner.configs, config), config)
        got = _run_one(tuner, args, kwargs, config, f"autotuned kernel {kernel}, {where}: ", hooks=False)
        diff = _compare(expected, got)
        if diff is not None:
            name, index, want, value, count, numel = diff
            raise AutotuneMismatch(
                f"autotuned kernel {kernel}: the final launch of the tuned config {where}, which runs after every "
                f"config's run as it does on a device, made {_at(name, index)} = {value!r} where the same config gave "
                f"{want!r} from the launch's values ({count} of {numel} elements of {name} differ): the kernel reads "
                f"what an earlier run wrote.  On a device the autotuner runs every config many times before that "
                f"launch, so the caller would get neither.  Name {name.split('[')[0].split('.')[0]!r} in "
                f"restore_value= (an argument updated in place) or reset_to_zero= (one accumulated into) of "
                f"@triton.autotune")
    finally:
        tuner.nargs = None


def _tune(tuner, kernel, args, kwargs):
    """Run every config from the launch's values; (the reference config, its outputs)."""
    configs = tuner.configs
    chosen = configs[reference_index(kernel, configs)]
    pruned = list(tuner.prune_configs(kwargs))
    if not pruned:
        raise TritonDistError(f"autotuned kernel {kernel}: prune_configs_by left no config to run; its "
                              f"early_config_prune must return at least one config")
    if not any(c is chosen for c in pruned) and chosen not in pruned:
        where = describe(configs, index_of(configs, chosen))
        raise TritonDistError(f"autotuned kernel {kernel}: the reference config {where} (chosen by "
                              f"{REFERENCE_ENV} or the first of the list) was pruned by prune_configs_by for these "
                              f"arguments; choose a config that is run with {REFERENCE_ENV}={kernel}:N (docs/api.md)")
    clash = set(kwargs) & set().union(*(c.kwargs for c in pruned))
    if clash:
        raise TritonDistError(f"autotuned kernel {kernel}: {', '.join(sorted(clash))} given at the launch and set by "
                              f"the autotuner's configs; leave {'them' if len(clash) > 1 else 'it'} out of the launch "
                              f"(Triton refuses this too: 'Conflicting meta-parameters')")
    tensors = _tensors(tuner, {**tuner.nargs, **kwargs})
    start = _copies(tensors)
    results = []          # (config, its outputs), in the order run
    refused = []          # the errors of configs a launch check refused (they never ran)
    for n, config in enumerate(pruned):
        if n:
            _put_back(tensors, start)            # every config computes from the launch's values
        label = f"autotuned kernel {kernel}, {describe(configs, index_of(configs, config), config)}: "
        try:
            results.append((config, _run_one(tuner, args, kwargs, config, label, hooks=True)))
        except Exception as e:
            if getattr(e, "launch_check", None) is None or getattr(e, "refusal", True) is False:
                raise                 # a kernel error, or a launch check that could not run: not a refusal
            refused.append(e)         # the npu-compile check: go on, so that every refused config is named
    if refused:
        first = refused[0]
        text = (f"the {first.launch_check} check refuses {len(refused)} of {len(pruned)} configs of autotuned kernel "
                f"{kernel} (triton-ascend's autotuner would drop them and tune among the others, so they never run "
                f"on the NPU):\n" + "\n".join(str(e) for e in refused))
        first.args = (text,)
        raise first
    expected = next(out for c, out in results if c is chosen or c == chosen)
    problems = []
    for config, outputs in results:
        if config is chosen or config == chosen:
            continue
        diff = _compare(expected, outputs)
        if diff is not None:
            name, index, want, value, count, numel = diff
            problems.append(f"{describe(configs, index_of(configs, config), config)}: {_at(name, index)} = {value!r} "
                            f"where the reference has {want!r} ({count} of {numel} elements of {name} differ)")
    if problems:
        which = "chosen by " + REFERENCE_ENV if os.environ.get(REFERENCE_ENV, "").strip() else "the first of the list"
        ref = describe(configs, index_of(configs, chosen))
        raise AutotuneMismatch(
            f"autotuned kernel {kernel}: {len(problems)} of {len(results) - 1} configs compute other outputs than the "
            f"reference {ref} ({which}), each run from the launch's values:\n  " + "\n  ".join(problems) +
            f"\nEvery config must compute the same result (the NPU runs whichever the tuning picks); to check against "
            f"another config, set {REFERENCE_ENV}={kernel}:N (docs/api.md)")
    return chosen, expected
