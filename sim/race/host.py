"""Host code's reads and writes of symmetric tensors, for the race detector (issue 26 item 3).

A rank's host code touches symmetric tensors through torch (`x.fill_(0)`, `x.tolist()`,
`torch.equal(out, want)`, `x[3] = 1`); those accesses race with peers' kernels exactly as a
kernel's do, ordered only by the host's edges: the launch of a kernel, its end, barriers
and host collectives (docs/races.md).  While the race check is on, a torch function mode
on the rank's main thread (torch's own interception point for every tensor function and
method, `torch.overrides.TorchFunctionMode`) hands each call that takes a symmetric tensor
to the recorder as a host access of its bytes:

- a write: the tensor an in-place method works on (`fill_`, `copy_`, `add_`, `x += 1`),
  the part of it `x[i] = v` assigns, and any `out=` tensor;
- a read: every other symmetric tensor argument (`tolist`, `numpy`, `item`, `equal`,
  `clone`, `sum`, printing, ...);
- nothing: calls that only make a view or read metadata (`x[2:4]`, `view`, `shape`,
  `data_ptr`, ...): the view's later use is the access.

Calls made by torch, triton or triton_dist themselves (the zero-fill of `symm_tensor`, which
a barrier orders; a kernel launch's argument handling) are not the user's and are left out.
What this can miss, never invent: a read through a numpy view taken earlier (`x.numpy()`
counts as a read when it is taken), advanced indexing (`x[mask]`), torch.distributed's own
collectives on a symmetric tensor (those are host collectives, edges already).
"""
from __future__ import annotations

import os
import sys

import torch
from torch.overrides import TorchFunctionMode

from .. import context
from .events import OP_HOST_READ, OP_HOST_WRITE, READ, WRITE

# calls that make a view or read metadata: no access to the tensor's bytes
NO_ACCESS = frozenset({
    "__get__", "__getitem__", "__len__", "__hash__", "view", "view_as", "reshape",
    "reshape_as", "narrow", "select", "split", "chunk", "unbind", "t", "transpose", "permute", "expand",
    "expand_as", "as_strided", "flatten", "unflatten", "unsqueeze", "squeeze", "contiguous", "cpu", "detach",
    "data_ptr", "untyped_storage", "storage", "storage_offset", "stride", "size", "dim", "numel", "nelement",
    "element_size", "is_contiguous", "is_floating_point", "is_complex", "get_device", "requires_grad_",
    "type", "__dlpack_device__", "unfold", "diagonal", "movedim", "swapaxes", "swapdims", "real", "imag",
})
WRITES_SELF = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
                         "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"})

_INTERNAL = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (torch,)) + \
    (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)


def _internal_dirs():
    import triton

    import triton_dist
    return _INTERNAL + tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (triton, triton_dist))


class HostAccesses(TorchFunctionMode):
    """The torch function mode that reports host accesses of symmetric tensors to `recorder`
    (RaceRecorder.host_access)."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder
        self.lo, self.hi = recorder.heap_span()
        self.internal = _internal_dirs()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name not in NO_ACCESS and context.core() is None:
            try:
                self._record(name, args, kwargs)
            except Exception:   # noqa: BLE001 - recording must never change what the call does
                pass
        # torch hands a function that checks for modes itself (torch.distributed's isend/irecv)
        # over by its module-level name, which may be the simulator's wrapper of it
        # (sim/host_p2p.py): call what the wrapper wraps, as the caller of the wrapper did
        return getattr(func, "_triton_dist_orig", func)(*args, **kwargs)

    def _span(self, t):
        """[lo, hi) of a CPU tensor's elements if they lie in the symmetric heaps, else None."""
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or t.numel() == 0:
            return None
        lo = t.data_ptr()
        if not self.lo <= lo < self.hi:
            return None
        n = t.element_size()
        extent = sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))
        neg = sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if st < 0)
        return lo + neg * n, lo + neg * n + (extent + 1) * n

    def _site(self):
        f = sys._getframe(3)        # _site <- _record <- __torch_function__ <- the caller
        while f is not None and f.f_code.co_filename.startswith(self.internal[:1]):
            f = f.f_back            # torch's own Python frames (Tensor.__repr__, torch.functional)
        if f is None or f.f_code.co_filename.startswith(self.internal):
            return None             # torch/triton/triton_dist's own use of the tensor
        return (f.f_code, f.f_lineno)

    def _record(self, name, args, kwargs):
        tensors = []
        for a in args:
            if isinstance(a, (list, tuple)):
                tensors.extend(x for x in a if isinstance(x, torch.Tensor))
            elif isinstance(a, torch.Tensor):
                tensors.append(a)
        out = kwargs.get("out")
        spans = [(i, s) for i, t in enumerate(tensors) if (s := self._span(t)) is not None]
        out_spans = [s for t in (out if isinstance(out, (list, tuple)) else (out,)) if (s := self._span(t))]
        if not spans and not out_spans:
            return
        site = self._site()
        if site is None:
            return
        writes_self = name in WRITES_SELF or (name.endswith("_") and not name.startswith("__"))
        rec = self.recorder
        for i, (lo, hi) in spans:
            if i == 0 and writes_self:
                if name == "__setitem__" and len(args) > 1:
                    part = self._span(args[0][args[1]]) if isinstance(args[0], torch.Tensor) else None
                    lo, hi = part or (lo, hi)
                rec.host_access(WRITE, OP_HOST_WRITE, lo, hi, site)
            else:
                rec.host_access(READ, OP_HOST_READ, lo, hi, site)
        for lo, hi in out_spans:
            rec.host_access(WRITE, OP_HOST_WRITE, lo, hi, site)


def install(recorder) -> HostAccesses:
    """Turn the mode on for the calling (the rank's main) thread, for the rest of the rank."""
    mode = HostAccesses(recorder)
    mode.__enter__()
    return mode
