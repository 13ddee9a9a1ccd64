"""Differential testing: the same function on several backends, what it returns compared.

    from triton_dist.testing import compare
    compare(main, world_size=2, backends=("sim", "cuda"))    # BackendsDisagree at the first difference

`compare` launches `fn` on each backend (triton_dist.launch) and compares the values its
ranks return, rank by rank, walking lists, tuples and dicts:

- tensors: same shape and dtype, then element by element, with the default tolerances of
  torch.testing.assert_close for their dtype (torch.testing._comparison.default_tolerances:
  float16 1e-3/1e-5, bfloat16 1.6e-2/1e-5, float32 1.3e-6/1e-5, float64 1e-7/1e-7, rtol/atol),
  exact for integer and boolean tensors, and bit for bit for the results of the
  collectives whose arithmetic is fixed (`bit_identical` marks them: the kernel library's
  all_gather, all_to_all, reduce_scatter and all_reduce, which copy, or sum in rank order in
  fp32, the same operations in the same order on every backend);
- numpy arrays and numpy scalars as tensors are: same dtype and shape, then element by element,
  floating ones with the tolerances of the torch dtype of the same name, the others exactly;
- Python floats (a tensor's `.tolist()` has lost its dtype) with float32's tolerances, an
  infinity equal only to itself and NaN to NaN (as torch.isclose), other values (ints, bools,
  strings, None, ...) by type and ==; dicts by their keys, in any order.

Explicit `rtol`/`atol` apply to every floating value, marked ones included; integers stay
exact.  Either may be a dict keyed by dtype (`{torch.float16: 4e-3}` or `{"float16": 4e-3}`):
then it applies to values of those dtypes only, the others keep their defaults; a key that names
no floating dtype (`{"fp16": ...}`, an integer dtype) or a negative tolerance is refused (pytest:
`@pytest.mark.compare_tolerance(rtol=..., atol=...)` on a test, the same forms).  The first difference is reported with the rank, where in the returned value it is,
the element's index and both values; the pytest plugin's `--compare-backends A,B` and
`triton-dist compare` use the same comparison (`first_difference`).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

BIT_IDENTICAL = "_triton_dist_bit_identical"     # the tensor attribute that marks an exact result


def bit_identical(t):
    """Mark tensor `t` as a result every backend must produce bit for bit (returns it).  The
    mark travels with the tensor through the launcher (pickling keeps a tensor's attributes;
    backend cuda's copy to the CPU carries them), not through views or copies made later."""
    setattr(t, BIT_IDENTICAL, True)
    return t


class BackendsDisagree(AssertionError):
    """Two backends returned different values; the message says where first."""

    def __init__(self, message, *, rank=None, path="", index=None, values=None):
        super().__init__(message)
        self.rank, self.path, self.index, self.values = rank, path, index, values


@dataclass
class Comparison:
    """What `compare` launched: the LaunchResult of each backend, in the order given."""
    backends: tuple
    results: dict = field(default_factory=dict)


def compare(fn, *args, world_size, backends=("sim", "cuda"), rtol=None, atol=None) -> Comparison:
    """Launch fn(*args) in `world_size` ranks of each backend and compare what the ranks
    return against the first backend's; raises BackendsDisagree at the first difference,
    else returns the Comparison.  rtol/atol: None for the per-dtype defaults (module doc)."""
    from triton_dist import launcher
    from triton_dist.errors import TritonDistError
    backends = tuple(backends)
    if len(backends) < 2 or len(set(backends)) != len(backends):
        raise TritonDistError(f"compare: backends must name at least two different backends, got {backends!r}")
    check_tolerances(rtol, atol, "compare")          # before anything is launched
    out = Comparison(backends)
    for name in backends:
        out.results[name] = launcher.launch(fn, *args, world_size=world_size, backend=name)
    first = backends[0]
    for other in backends[1:]:
        check_values(out.results[first].values, out.results[other].values, (first, other), rtol=rtol, atol=atol)
    return out


@functools.lru_cache(maxsize=None)
def tolerance_keys() -> tuple:
    """The dtype names a tolerance dict may be keyed by: torch's floating and complex dtypes (the
    values compared with a tolerance; integers and booleans are compared exactly)."""
    import torch
    return tuple(sorted({_dtype_name(d) for d in vars(torch).values()
                         if isinstance(d, torch.dtype) and (d.is_floating_point or d.is_complex)}))


def check_tolerances(rtol, atol, what="compare") -> None:
    """Refuse a tolerance that would be ignored or misread: a dict key that names no floating
    dtype (`{"fp16": ...}`, a typo, an integer dtype), a value that is not a number >= 0."""
    from triton_dist.errors import TritonDistError
    for name, tol in (("rtol", rtol), ("atol", atol)):
        entries = tol.items() if isinstance(tol, dict) else [(None, tol)]
        for key, value in entries:
            if key is not None and _key_name(key) not in tolerance_keys():
                raise TritonDistError(
                    f"{what}: {name} has the key {key!r}, which names no floating dtype, so it would apply to "
                    f"nothing; key it by one of these dtypes (a torch or numpy dtype, or its name): "
                    f"{', '.join(tolerance_keys())} (integers and booleans are compared exactly)")
            if value is None and key is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                at = f"[{key!r}]" if key is not None else ""
                raise TritonDistError(f"{what}: {name}{at} must be a number >= 0, got {value!r}")


def _dtype_name(d) -> str:
    return str(d).replace("torch.", "")


def _key_name(key):
    """A tolerance key as a dtype name: torch dtypes, numpy dtypes and scalar types, names."""
    import numpy as np
    import torch
    if isinstance(key, torch.dtype):
        return _dtype_name(key)
    if isinstance(key, str) or key is None:       # (np.dtype(None) would be float64)
        return str(key)
    try:
        return np.dtype(key).name
    except TypeError:
        return repr(key)


def check_values(values_a, values_b, names, *, rtol=None, atol=None, what="") -> None:
    """Compare the per-rank values of two launches; BackendsDisagree at the first difference."""
    check_tolerances(rtol, atol)
    a_name, b_name = names
    if len(values_a) != len(values_b):
        raise BackendsDisagree(f"backends {a_name!r} and {b_name!r} disagree{what}: {len(values_a)} ranks returned "
                               f"values on {a_name!r}, {len(values_b)} on {b_name!r}")
    for rank, (a, b) in enumerate(zip(values_a, values_b)):
        diff = first_difference(a, b, rtol=rtol, atol=atol)
        if diff is not None:
            path, index, va, vb, how = diff
            where = f"rank {rank}, value {path or '(the whole value)'}"
            if index is not None:
                where += f", index {index}"
            raise BackendsDisagree(f"backends {a_name!r} and {b_name!r} disagree{what}: {where}: {a_name} {va} vs "
                                   f"{b_name} {vb} ({how})", rank=rank, path=path, index=index, values=(va, vb))


def first_difference(a, b, *, rtol=None, atol=None, path=""):
    """None if a and b agree, else (path, index, value in a, value in b, how they were compared)."""
    import numpy as np
    import torch
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return path, None, _kind(a), _kind(b), "a tensor on one backend only"
        return _tensor_difference(a, b, rtol, atol, path)
    # numpy arrays and numpy scalars (np.float32(...), np.bool_, ...): by their dtype, as tensors are
    if isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        if not (isinstance(a, (np.ndarray, np.generic)) and isinstance(b, (np.ndarray, np.generic))) or \
                isinstance(a, np.ndarray) != isinstance(b, np.ndarray):
            return path, None, _kind(a), _kind(b), "a numpy value on one backend only, or an array against a scalar"
        return _array_difference(np.asarray(a), np.asarray(b), rtol, atol, path, scalar=not isinstance(a, np.ndarray))
    if isinstance(a, dict) and isinstance(b, dict):
        if type(a) is not type(b):
            return path, None, _kind(a), _kind(b), "mappings of different types"
        if set(a) != set(b):                # as dict ==: the keys, not their order
            return path, None, f"keys {list(a)}", f"keys {list(b)}", "dicts with different keys"
        for k in a:
            d = first_difference(a[k], b[k], rtol=rtol, atol=atol, path=f"{path}[{k!r}]")
            if d is not None:
                return d
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            return path, None, f"{type(a).__name__} of {len(a)}", f"{type(b).__name__} of {len(b)}", \
                "sequences of different kind or length"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, rtol=rtol, atol=atol, path=f"{path}[{i}]")
            if d is not None:
                return d
        return None
    if type(a) is float and type(b) is float:
        r, t = _tolerances(torch.float32, _for_dtype(rtol, torch.float32), _for_dtype(atol, torch.float32))
        # as torch.isclose: equal values first (inf == inf, though inf - inf is nan), NaN is NaN, an
        # infinity equals only itself (inf vs -inf: |a - b| <= r * |b| holds, both sides inf)
        ok = a == b or (a != a and b != b) or \
            (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= t + r * abs(b))
        return None if ok else (path, None, a, b, f"Python floats, rtol {r:g}, atol {t:g}")
    if type(a) is not type(b):
        return path, None, _kind(a), _kind(b), "values of different types"
    try:
        same = bool(a == b)
    except Exception as e:              # noqa: BLE001 - an == without one truth value: compare what they show
        same, how = repr(a) == repr(b), f"repr (== gave no truth value: {type(e).__name__})"
    else:
        how = "=="
    return None if same else (path, None, repr(a), repr(b), how)


def _kind(x) -> str:
    import numpy as np
    import torch
    if isinstance(x, torch.Tensor):
        return f"a tensor {_describe(x)}"
    if isinstance(x, np.ndarray):
        return f"a numpy array {x.dtype}{list(x.shape)}"
    return f"a {type(x).__name__} {x!r}"


def _describe(t) -> str:
    return f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}"


def _tolerances(dtype, rtol, atol):
    from torch.testing._comparison import default_tolerances
    r, t = default_tolerances(dtype)
    return (r if rtol is None else rtol), (t if atol is None else atol)


def _for_dtype(tol, dtype):
    """A tolerance given for every dtype (a number or None), or for some (a dict keyed by
    torch dtype, numpy dtype or its name): the one for `dtype`, None where the dict has none."""
    if not isinstance(tol, dict):
        return tol
    name = _key_name(dtype)
    for key, value in tol.items():
        if _key_name(key) == name:
            return value
    return None


def _array_difference(a, b, rtol, atol, path, scalar=False):
    """Two numpy arrays (0-d for numpy scalars): dtype and shape, then element by element with
    the tolerances of the torch dtype of the same name (float16, float32, float64, complex)."""
    import numpy as np
    import torch
    if a.dtype != b.dtype or a.shape != b.shape:
        return path, None, f"{a.dtype}{list(a.shape)}", f"{b.dtype}{list(b.shape)}", \
            "numpy values of different dtype or shape"
    if a.size == 0:
        return None
    if a.dtype.kind in "fc":
        tdtype = getattr(torch, a.dtype.name, torch.float64)
        r, t = _tolerances(tdtype, _for_dtype(rtol, a.dtype), _for_dtype(atol, a.dtype))
        same = np.isclose(a, b, rtol=r, atol=t, equal_nan=True)
        how = f"rtol {r:g}, atol {t:g} for numpy {a.dtype}"
    elif a.dtype.kind in "biumMSUV":
        same, how = a == b, f"exact (numpy {a.dtype})"
    else:                               # object arrays: each element as a value of its own
        for idx in np.ndindex(a.shape):
            d = first_difference(a[idx], b[idx], rtol=rtol, atol=atol, path=f"{path}[{', '.join(map(str, idx))}]")
            if d is not None:
                return d
        return None
    same = np.asarray(same)
    if bool(same.all()):
        return None
    bad = np.argwhere(~same)
    index = None if scalar else tuple(int(i) for i in bad[0])
    va, vb = (a.item(), b.item()) if scalar else (a[index].item(), b[index].item())
    return path, index, va, vb, f"{how}; {len(bad)} of {a.size} elements differ"


def _tensor_difference(a, b, rtol, atol, path):
    import torch
    rtol, atol = _for_dtype(rtol, a.dtype), _for_dtype(atol, a.dtype)
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return path, None, _describe(a), _describe(b), "tensors of different dtype or shape"
    floating = a.is_floating_point() or a.is_complex()
    exact = not floating or (rtol is None and atol is None and
                             (getattr(a, BIT_IDENTICAL, False) or getattr(b, BIT_IDENTICAL, False)))
    a, b = a.detach().cpu(), b.detach().cpu()
    if a.numel() == 0:
        return None
    if not floating:
        same, how = a == b, f"exact ({str(a.dtype).replace('torch.', '')})"
    elif exact:
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}.get(a.element_size())
        same = (a.contiguous().view(bits) == b.contiguous().view(bits)) if bits is not None and not a.is_complex() \
            else (a == b)
        same = same | (torch.isnan(a) & torch.isnan(b))      # a NaN's payload is no result
        how = "bit for bit: a result marked bit_identical"
    else:
        r, t = _tolerances(a.dtype, rtol, atol)
        same = torch.isclose(a, b, rtol=r, atol=t, equal_nan=True)
        how = f"rtol {r:g}, atol {t:g} for {str(a.dtype).replace('torch.', '')}"
    if bool(same.all()):
        return None
    bad = (~same).nonzero()
    index = tuple(int(i) for i in bad[0]) if a.dim() else ()
    va, vb = a[index].item(), b[index].item()
    how += f"; {bad.shape[0]} of {a.numel()} elements differ"
    return path, index, va, vb, how
