"""Backend hivm's fast paths keep its checks: on-chip views checked once per core and reused
(backend_ascend/cpu_run/views.py), global views checked at every call, and the programs of a
kernel that cannot wait for one another run on one core without threads (waits.py); a kernel
whose programs may wait is still dispatched onto the device's cores."""
from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_dist


def _missing():
    from triton_dist.backend_ascend.cpu_run.backend import HivmBackend
    return HivmBackend.missing()


def _descriptor(base, offset, size, stride=1):
    d = (ctypes.c_int64 * 5)(base, base, offset, size, stride)
    return d, ctypes.addressof(d)


@pytest.fixture
def block():
    """A block state with a pool, as runner.LaunchArgs._run sets it."""
    from triton_dist.backend_ascend.cpu_run import memory as M, views
    s = M.BlockState(sizes={"ub": 192 * 1024, "ub_align": 32}, kernel="k")
    s.pool = views.acquire()
    M.set_state(s)
    yield s
    views.release(s.pool)
    M.set_state(None)


def test_on_chip_views_are_reused_per_core_and_bad_operands_still_fault(block):
    from triton_dist.backend_ascend.cpu_run import memory as M, views
    f32 = np.dtype(np.float32)
    base = views.space_base("ub")
    keep, good = _descriptor(base, 8, 64)                   # fp32 elements 8..71: byte 32, aligned
    a = views.ub(good, 1, f32, "vadd operand")
    assert views.ub(good, 1, f32, "vadd operand") is a      # the second call reuses the checked view
    a[...] = 3.0
    ub = block.spaces["ub"]
    assert (ub[32:32 + 256].view(np.float32) == 3.0).all()  # the view is the core's UB itself
    keep2, past = _descriptor(base, 49152 - 8, 64)          # runs past 192 KiB
    with pytest.raises(M.DeviceFault, match="beyond the 192 KiB"):
        views.ub(past, 1, f32, "vadd operand")
    keep3, odd = _descriptor(base, 3, 64)                   # starts at byte 12
    with pytest.raises(M.DeviceFault, match="unaligned UB VEC access"):
        views.ub(odd, 1, f32, "vadd operand")
    views.ub(odd, 1, f32, "a DMA destination", vector=False)   # DMA handles unaligned heads
    with pytest.raises(M.DeviceFault, match="unaligned UB VEC access"):
        views.ub(odd, 1, f32, "vadd operand")               # the DMA's pass is not the vector's
    # the next block on this core gets the space zeroed, as a fresh buffer was
    block.spaces.clear()
    assert views.space_base("ub") == base
    assert (a == 0).all()


def test_bool_operands_are_unpacked_from_reused_bit_positions_and_still_checked(block):
    # a bool UB operand: one bit a lane, least significant first (templates.Bits, Cmp1D.cpp set_result_bit)
    from triton_dist.backend_ascend.cpu_run import memory as M, templates, views
    base = views.space_base("ub")
    keep, bits = _descriptor(base, 256 * 8 + 3, 20)         # 20 lanes from bit 3 of byte 256
    vcmps = templates.handler("vcmps_lt_1d_float", [])
    keep2, x = _descriptor(base, 0, 20)
    xs = views.ub(x, 1, np.dtype(np.float32), "x")
    xs[...] = np.arange(20) - 9.5
    vcmps(x, 0.0, bits)
    first = templates._bits(bits, 1, "mask")
    assert templates._bits(bits, 1, "mask") is first          # positions built once per core's pool
    vcmps(x, 0.0, bits)
    lanes = np.unpackbits(block.spaces["ub"][256:260], bitorder="little")[3:23].astype(bool)
    assert lanes.tolist() == (np.arange(20) - 9.5 < 0).tolist()
    keep3, past = _descriptor(base, 192 * 1024 * 8 - 4, 20)  # 16 of its lanes past the 192 KiB
    with pytest.raises(M.DeviceFault, match="beyond the 192 KiB"):
        vcmps(x, 0.0, past)


def test_global_views_are_checked_against_the_live_buffers_at_every_call(block):
    from triton_dist.backend_ascend.cpu_run import memory as M, views
    f32 = np.dtype(np.float32)
    t = torch.arange(40, dtype=torch.float32)
    start = t.data_ptr()
    block.buffers = [M.Buffer(start, start + 160, "argument 'x' (float32[40])", "x")]
    keep, inside = _descriptor(start, 8, 32)
    assert views.gm(inside, 1, f32, "load_gm_to_ubuf_1d_float", "read").tolist() == list(range(8, 40))
    keep2, over = _descriptor(start, 8, 64)                 # the widened tile of triton-ascend #2332
    with pytest.raises(M.DeviceFault, match="The DDR address of the MTE instruction is out of range.*"
                                            "argument 'x'.*bytes 32..288 of a 160-byte buffer"):
        views.gm(over, 1, f32, "load_gm_to_ubuf_1d_float", "read")
    block.buffers = []                                     # the same in-bounds view once the buffer is gone
    with pytest.raises(M.DeviceFault, match="in no live buffer"):
        views.gm(inside, 1, f32, "load_gm_to_ubuf_1d_float", "read")


@triton.jit
def _spin_helper(x, n):
    i = 0
    while i < n:
        x = x * 0.5
        i += 1
    return x


@triton.jit
def _counted(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in range(0, n):
        x = x * 0.5
    tl.store(out_ptr + offs, x)


@triton.jit
def _via_helper(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _spin_helper(tl.load(x_ptr + offs), n))


@triton.jit
def _via_constexpr(x_ptr, out_ptr, n, F: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, F(tl.load(x_ptr + offs), n))


@triton.jit
def _flipped(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.flip(tl.load(x_ptr + offs), 0))


def test_a_while_loop_in_the_kernel_a_helper_or_a_constexpr_function_may_wait():
    from triton_dist.backend_ascend.cpu_run import waits
    assert not waits.may_spin(_counted)
    # tl.flip's helpers call triton's _log2, a @constexpr_function with a while loop run at compile time
    assert not waits.may_spin(_flipped)
    assert waits.may_spin(_spin_helper)
    assert waits.may_spin(_via_helper)
    assert not waits.may_spin(_via_constexpr)
    assert waits.may_spin(_via_constexpr, (_spin_helper,))
    assert waits.calls_library("declare void @_mlir_ciface_aclshmem_wait_int32(ptr, i32, i64)\n")
    assert not waits.calls_library("declare void @_mlir_ciface_vadd_1d_float(ptr, ptr, ptr, ptr)\n")


@triton.jit
def _scale(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 0.5 + 1.0)


@triton.jit
def _halve_n_times(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    i = 0
    while i < n:
        x = x * 0.5
        i += 1
    tl.store(out_ptr + offs, x)


def _threads_per_launch():
    started = [0]
    start = threading.Thread.start

    def counted(self):
        started[0] += 1
        return start(self)
    x = torch.randn(8 * 64, generator=torch.Generator().manual_seed(0))
    a, b = torch.zeros_like(x), torch.zeros_like(x)
    _scale[(8,)](x, a, BLOCK=64)                    # compiled first: the compiler starts threads of its own
    _halve_n_times[(8,)](x, b, 3, BLOCK=64)
    threading.Thread.start = counted
    try:
        _scale[(8,)](x, a, BLOCK=64)
        independent = started[0]
        _halve_n_times[(8,)](x, b, 3, BLOCK=64)
        spinning = started[0] - independent
    finally:
        threading.Thread.start = start
    return independent, spinning, torch.equal(a, x * 0.5 + 1.0), torch.equal(b, x * 0.125)


@pytest.mark.skipif(bool(_missing()), reason=f"backend hivm cannot run here: {'; '.join(_missing())}")
def test_independent_programs_run_on_one_core_and_a_while_loop_kernel_on_the_device_cores():
    independent, spinning, ok_a, ok_b = triton_dist.launch(_threads_per_launch, world_size=1, backend="hivm").values[0]
    assert ok_a and ok_b
    assert independent == 0, f"a kernel whose programs cannot wait started {independent} core threads"
    assert spinning == 8, f"a while-loop kernel's 8 programs ran on {spinning} started core threads, not 8"
