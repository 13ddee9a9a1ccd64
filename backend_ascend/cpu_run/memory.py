"""What a compiled block may touch, and the faults the NPU raises when it touches something else.

Global memory: the live buffers of the launch (each tensor argument's whole storage: a
symmetric tensor's heap slot, a torch tensor's allocation).  Every global-memory access a
template call makes (load_gm_to_ubuf_*, store_ubuf_to_gm_*) is checked against them before it
runs; one outside every buffer is the NPU's MTE fault ("The DDR address of the MTE instruction
is out of range", error 507035 in triton-ascend #2332 and vllm-ascend #16275), reported with the
buffer, the byte offset and the source lines.  Scalar global loads/stores the compiler emits
inline (memref.load/store of a gm memref) are checked too: natively against the table the runner
fills (`fill_gm_table`; rewrite.gm_scalar_accesses), a miss through `gm_scalar_fault`.

On-chip memory: one buffer per space per core thread (rewrite.py), of the size the module's
target spec gives (UB 192 KiB on 910B).  Every UB operand of a template call must lie inside
it, and a vector operand must start 32-byte aligned (UB_ALIGN_SIZE = 256 bits in the module's
target spec; NPUTargetSpec.td v1.2.0 line 70; the template library checks the same
`isAddress32ByteAligned`, Template/include/Utils.h, v1.2.0).
"""
from __future__ import annotations

import ctypes
import re
import threading
from dataclasses import dataclass, field

import numpy as np

from triton_dist.errors import TritonDistError

MTE_OUT_OF_RANGE = "The DDR address of the MTE instruction is out of range"


class DeviceFault(TritonDistError):
    """What the NPU would stop the kernel with (the message says where and why)."""


@dataclass
class Buffer:
    start: int
    end: int
    label: str            # "argument 'x_ptr' (float32[40])"
    arg: str = ""         # the kernel parameter it was passed as


@dataclass
class BlockState:
    """The running block of one core thread (set by the runner around each program)."""
    block: int = 0
    sub_block: int = 0
    blocks: int = 1
    sub_blocks: int = 1
    buffers: list = field(default_factory=list)
    spaces: dict = field(default_factory=dict)        # space -> numpy uint8 array
    sizes: dict = field(default_factory=dict)
    fault: BaseException | None = None
    source_access: object = None                       # callable(arg name) -> source lines (runner.py)
    kernel: str = ""
    calls: int = 0
    flags: object = None                               # runner.BlockFlags of a mix kernel's block
    core: str = ""                                     # "aic" / "aiv": which half of a mix kernel
    failed_call: str = ""                              # the bound function whose call failed first (runner._guard)
    failed_source: str = ""                            # its source lines, where found (runner._call_source)
    launch: object = None                              # runner.Native: .failed, .abort() (the launch's first failure)

    def fail(self, e: BaseException) -> None:
        if self.fault is None:
            self.fault = e
            if self.launch is not None:
                self.launch.abort()


_local = threading.local()


def state() -> BlockState:
    s = getattr(_local, "state", None)
    if s is None:
        raise TritonDistError("a template or aclshmem call of a compiled kernel ran outside a block of the hivm "
                              "backend's runner")
    return s


def set_state(s: BlockState | None) -> None:
    _local.state = s


def space_base(space: str) -> int:
    s = state()
    buf = s.spaces.get(space)
    if buf is None:
        buf = s.spaces[space] = np.zeros(s.sizes[space], dtype=np.uint8)
    return buf.ctypes.data


# --- memref descriptors --------------------------------------------------------------------
@dataclass
class View:
    aligned: int
    offset: int
    sizes: tuple
    strides: tuple
    itemsize: int
    allocated: int

    @property
    def empty(self) -> bool:
        return any(s <= 0 for s in self.sizes)

    def span(self):
        """[lo, hi) of the bytes the view touches."""
        start = self.aligned + self.offset * self.itemsize
        lo = hi = 0
        for size, stride in zip(self.sizes, self.strides):
            ext = (size - 1) * stride
            lo, hi = lo + min(0, ext), hi + max(0, ext)
        return start + lo * self.itemsize, start + (hi + 1) * self.itemsize

    def array(self, dtype):
        """numpy view (no copy) of the memory the descriptor names."""
        dtype = np.dtype(dtype)
        if self.empty:
            return np.zeros(self.sizes, dtype=dtype)
        lo, hi = self.span()
        buf = (ctypes.c_char * (hi - lo)).from_address(lo)
        flat = np.frombuffer(buf, dtype=np.uint8)
        start = self.aligned + self.offset * self.itemsize - lo
        return np.lib.stride_tricks.as_strided(flat[start:].view(dtype), shape=self.sizes,
                                               strides=[st * self.itemsize for st in self.strides])


def view(addr: int, rank: int, itemsize: int) -> View:
    p = (ctypes.c_int64 * (3 + 2 * rank)).from_address(addr)
    return View(p[1], p[2], tuple(p[3:3 + rank]), tuple(p[3 + rank:3 + 2 * rank]), itemsize, p[0])


# --- the checks ----------------------------------------------------------------------------
def _owner(s: BlockState, addr: int):
    for b in s.buffers:
        if b.start <= addr < b.end:
            return b
    return None


def check_gm(v: View, what: str, kind: str) -> None:
    """Raise the NPU's MTE fault if the global-memory view `v` reaches outside every live buffer."""
    if v.empty:
        return
    s = state()
    lo, hi = v.span()
    for b in s.buffers:
        if b.start <= lo and hi <= b.end:
            return
    where, lines = _outside(s, lo, hi, _owner(s, v.allocated) or _owner(s, v.aligned) or _owner(s, lo))
    raise DeviceFault(
        f"kernel {s.kernel}, block {s.block}: {MTE_OUT_OF_RANGE} (error 507035 on an NPU): the compiled kernel's "
        f"{what} {kind}s {where}.{lines} Fix the kernel so that the compiled code stays in bounds (e.g. pad the "
        f"buffer to the block size, or load with a contiguous mask that the compiler keeps as a bounded copy).")


def _neighbours(s: BlockState, lo: int) -> list:
    """The buffers either side of an address outside every buffer, the nearer first: the one ending
    below it (an index read off its end) and the one starting above it (a negative index)."""
    below = max((b for b in s.buffers if b.end <= lo), key=lambda b: b.end, default=None)
    above = min((b for b in s.buffers if b.start > lo), key=lambda b: b.start, default=None)
    found = [b for b in (below, above) if b is not None]
    return sorted(found, key=lambda b: b.start - lo if lo < b.start else lo - b.end + 1)


def _outside(s: BlockState, lo: int, hi: int, base):
    """(where the bytes [lo, hi) lie relative to `base`, the source lines accessing it) of a fault."""
    if base is not None:
        outside = (f"the first byte outside it at offset {lo - base.start}" if lo < base.start else
                   f"the first byte outside it at offset {max(base.end, min(hi, base.end)) - base.start}")
        where = (f"{base.label}: bytes {lo - base.start}..{hi - base.start} of a {base.end - base.start}-byte "
                 f"buffer ({outside})")
    else:
        where = f"address 0x{lo:x}..0x{hi:x}, which is in no live buffer"
    lines = s.source_access(base.arg if base is not None else "") if s.source_access else ""
    return where, lines


# --- scalar global-memory accesses (rewrite.gm_scalar_accesses) ------------------------------
def fill_gm_table(addr: int, slots: int, buffers) -> None:
    """Write the live buffers into the module's native table (@__hivm_gm_table at `addr`: the
    count, then [start, end) pairs).  Buffers past `slots`, or added during the run (a peer's,
    by aclshmem_ptr), are found by gm_scalar_fault instead: the table only makes hits cheap."""
    pairs = [(b.start, b.end) for b in buffers][:slots]
    t = (ctypes.c_int64 * (1 + 2 * slots)).from_address(addr)
    t[0] = 0                      # a block reading the table meanwhile sees no pairs, not half-written ones
    for i, (lo, hi) in enumerate(pairs):
        t[1 + 2 * i], t[2 + 2 * i] = lo, hi
    t[0] = len(pairs)


SCALAR_OUT_OF_RANGE = "out-of-range scalar GM access"


def gm_scalar_fault(addr: int, nbytes: int, kind: int) -> bool:
    """A scalar load (kind 0) or store (1) the native table did not place: True if it lies in a
    live buffer after all, else the fault.  On an NPU the scalar unit, not an MTE, makes this
    access; its own error text is not verified: the AI-core exception code 507035 that GM access
    faults report (triton-ascend #494: "The MPU address access is invalid", vllm-ascend #11680:
    "The DDR address of the MTE instruction is out of range") is inferred to be what it raises."""
    s = state()
    lo, hi = int(addr), int(addr) + int(nbytes)
    for b in s.buffers:
        if b.start <= lo and hi <= b.end:
            return True
    owner = _owner(s, lo)
    if owner is not None:
        where, lines = _outside(s, lo, hi, owner)
    else:
        # which buffer the index was meant for cannot be told from the address: the buffers are
        # wherever the allocator put them, so both neighbours are named, the nearer first
        parts = [_outside(s, lo, hi, b) for b in _neighbours(s, lo)] or [_outside(s, lo, hi, None)]
        where = " or, if meant for the buffer on its other side, ".join(w for w, _ in parts)
        lines = "".join(dict.fromkeys(ln for _, ln in parts))
    op, verb, call = (("scalar load (memref.load", "reads", "tl.load") if kind == 0 else
                      ("scalar store (memref.store", "writes", "tl.store"))
    raise DeviceFault(
        f"kernel {s.kernel}, block {s.block}: {SCALAR_OUT_OF_RANGE} (error 507035 on an NPU, inferred): the compiled "
        f"kernel's {op} of {nbytes} bytes, emitted inline for a scalar or indirect {call}) {verb} {where}.{lines} "
        f"Fix the index so that it stays inside the tensor (a mask on a scalar access, or on the lanes of an "
        f"indirect one, must keep the address in bounds too).")


# Templates that take a misaligned UB operand by themselves, with scalar instructions (AscendNPU-IR
# v1.2.0 sources; only the CPU-trace build asserts alignment): a misaligned operand is no fault for
# them.  Element-wise v<op>_<R>d_<T> / _vs_ / _sv_ / unary (R = 1..3) run the elements before the
# first 32-byte boundary, or all of them, on the scalar unit (eltwise_get_element_nums_on_scalar,
# Template/include/Vector/VecUtils.h:1083-1133, used by eltwise_vv_2d, lib/Vector/Elementwise/
# EltWise2D.cpp:255-281 and its 1-D/3-D twins); vsel_* 1-D (include/Vector/CmpSel/SelUtils.h:65-74),
# vcmp_/vcmps_ 1-D (CmpSel/CmpUtils.h:117-135) and vcast_ 1-D/2-D (Cast/CastUtils.h:251-276) fall
# back to a scalar loop when any operand is misaligned; transpose_2d checks its own (templates_layout).
# Every other template's vector operand must start aligned (inferred from their assertions, e.g.
# Reduction/ReduceR.cpp:32-36, Broadcast/BrcLastAxis.cpp:218-222).
_SCALAR_FALLBACK = re.compile(r"(?:v[a-z]+(?:_vs|_sv)?_[123]d_|vsel_(?:vv|vs|sv|ss)_1d_|vcmps?_[a-z]+_1d_|"
                              r"vcast_\w+?_[12]d(?:_with_[a-z_]+)? )")


def space_offset(addr: int, space: str = "ub") -> int:
    """`addr` as a byte offset into the running core's `space` (alignment is relative to the space's
    start: the host buffer standing for it need not be 32-byte aligned itself)."""
    buf = state().spaces.get(space)
    return addr - (buf.ctypes.data if buf is not None else 0)


def handles_unaligned(what: str) -> bool:
    """Whether the template named at the start of `what` ("vmax_2d_half operand") takes a misaligned
    UB operand by itself (see _SCALAR_FALLBACK)."""
    return bool(_SCALAR_FALLBACK.match(what))


def check_ub(v: View, what: str, space: str = "ub", vector: bool = True) -> None:
    if v.empty:
        return
    s = state()
    buf = s.spaces.get(space)
    if buf is None:
        return
    base, size = buf.ctypes.data, len(buf)
    lo, hi = v.span()
    if lo < base or hi > base + size:
        raise DeviceFault(
            f"kernel {s.kernel}, block {s.block}: the compiled kernel's {what} uses {space.upper()} bytes "
            f"{lo - base}..{hi - base}, beyond the {size // 1024} KiB the core has ({space.upper()} overflow; "
            f"view offset {v.offset}, sizes {list(v.sizes)}, strides {list(v.strides)}); make the kernel's blocks "
            f"smaller")
    start = v.aligned + v.offset * v.itemsize - base
    align = s.sizes.get("ub_align", 32)
    if vector and space == "ub" and start % align and not handles_unaligned(what):
        raise DeviceFault(
            f"kernel {s.kernel}, block {s.block}: unaligned UB VEC access: the compiled kernel's {what} starts at "
            f"UB byte {start}, not a multiple of {align} (vector instructions address UB in {align}-byte "
            f"blocks; triton-ascend #1277, #1638)")
