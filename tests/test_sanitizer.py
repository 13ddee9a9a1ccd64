"""msSanitizer's classes the simulator checks (issue 26 item 5), each two-sided: the correct
kernel runs clean under the free schedule and pct/random seeds; its buggy twin is reported,
and the report names the cause and the fix.

Oracles: what the NPU's compiler and library do (docs/device_model.md, the rows on alignment,
initialisation and cross-core flags): AscendNPU-IR moves a kernel's GM data with
copy_gm_to_ubuf_align_b8/_b16/_b32 (64-bit elements as two 32-bit ones), so an address off that
grain is invalid (that the hardware faults there: inferred, not verified); a tail axis that is
not a multiple of 32 bytes is padded by triton-ascend's compiler (performance only), so it is
not reported; aclshmem_malloc does not zero (upstream's
own tests zero their signals after aclshmem_create_tensor); a cross-core flag set and never
waited for outlives the kernel (msSanitizer's synccheck).  Triton's plain interpreter runs the
misaligned kernel without complaint (checked below): that is the model difference.
"""
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra.cann import extension as al

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm
from triton_dist.sim.initcheck import UninitializedReadError
from triton_dist.sim.memory import MisalignedAccessError

SCHEDULES = [("free", None), ("pct", 0), ("pct", 1), ("random", 0), ("random", 1)]


def _launch(body, *args, world_size=1, **kw):
    return [triton_dist.launch(body, *args, world_size=world_size, schedule=s, seed=seed, timeout=300, **kw).values
            for s, seed in SCHEDULES]


# ---- misaligned GM accesses -------------------------------------------------------------------

@triton.jit
def wide_view(x, out, OFF: tl.constexpr, WIDE: tl.constexpr, N: tl.constexpr):
    p = (x + OFF).to(tl.pointer_type(WIDE))          # a byte pointer seen as a wider type
    v = tl.load(p + tl.arange(0, N))
    tl.store((out + OFF).to(tl.pointer_type(WIDE)) + tl.arange(0, N), v + 1)


def _wide(off, wide, n=4):
    x = torch.arange(64, dtype=torch.int8)
    out = torch.zeros(64, dtype=torch.int8)
    try:
        wide_view[(1,)](x, out, OFF=off, WIDE=wide, N=n)
    except MisalignedAccessError as e:
        return str(e)
    return out.tolist()


def test_aligned_views_pass_and_misaligned_ones_are_reported():
    def body():
        return [_wide(8, tl.float32), _wide(2, tl.int16), _wide(4, tl.int64),
                _wide(2, tl.float32), _wide(1, tl.int16), _wide(2, tl.int64)]
    for values in _launch(body):
        ok32, ok16, ok64, bad32, bad16, bad64 = values[0]
        assert all(isinstance(v, list) for v in (ok32, ok16, ok64))
        assert ok16[2] == 3 and ok16[3] == 3                      # int16 (0x0302) + 1 at bytes 2..3
        for msg, grain, elem in ((bad32, 4, "float32"), (bad16, 2, "int16"), (bad64, 4, "int64")):
            assert isinstance(msg, str) and msg.startswith("misaligned access: rank 0 core "), msg
            assert f"load of {elem} at test_sanitizer.py:" in msg and "(wide_view)" in msg, msg
            assert f"not a multiple of {grain} bytes" in msg and "tensor argument 'x'" in msg, msg
            assert "Fix: move a pointer of this dtype only by whole elements" in msg, msg


def test_the_plain_interpreter_runs_the_misaligned_kernel():
    """The model difference: Triton's interpreter on the CPU reads misaligned words happily."""
    code = ("import torch, triton, triton.language as tl\n"
            "@triton.jit\n"
            "def k(x, out):\n"
            "    v = tl.load((x + 2).to(tl.pointer_type(tl.float32)) + tl.arange(0, 4))\n"
            "    tl.store(out + tl.arange(0, 4), v)\n"
            "k[(1,)](torch.zeros(64, dtype=torch.int8), torch.ones(4))\n"
            "print('ran')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_DIST")}
    env["TRITON_INTERPRET"] = "1"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ran", p.stderr


@triton.jit
def short_rows(x, out, ROWS: tl.constexpr, COLS: tl.constexpr, PCOLS: tl.constexpr):
    r = tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, PCOLS)[None, :]
    m = c < COLS
    tl.store(out + r * COLS + c, tl.load(x + r * COLS + c, mask=m) * 2.0, mask=m)


def test_a_tail_axis_off_32_bytes_is_not_reported():
    """(8, 3) float32: rows of 12 bytes.  triton-ascend pads such tail axes itself (its
    programming guide: 'If the tail axis length is insufficient, the tail axis length will be
    automatically padded'), so nothing is reported and the values are right."""
    def body():
        x = torch.arange(24, dtype=torch.float32)
        out = torch.zeros(24)
        short_rows[(1,)](x, out, ROWS=8, COLS=3, PCOLS=4)
        return out.tolist()
    for values in _launch(body):
        assert values[0] == [2.0 * i for i in range(24)]


# ---- reads of memory nothing wrote ----------------------------------------------------------------

@triton.jit
def counted(sig, out):
    # every rank adds 1 to rank 0's slot, rank 0 waits until all have: relies on the slot starting at 0
    shm.signal_op(sig, 1, shm.ACLSHMEM_SIGNAL_ADD, 0)
    if dl.rank() == 0:
        shm.signal_wait_until(sig, shm.ACLSHMEM_CMP_EQ, dl.num_ranks())
        tl.store(out + tl.arange(0, 1), tl.full((1,), 1, tl.int32))


def _counted(zero_first):
    from triton_dist.sim.compat import shmem as ash
    sig = ash.aclshmem_create_tensor([16], dtype=torch.int32)      # the line the report must name
    if zero_first:
        sig.zero_()
        triton_dist.barrier()
    out = torch.zeros(1, dtype=torch.int32)
    try:
        counted[(1,)](sig, out)
    except UninitializedReadError as e:
        return str(e)
    triton_dist.barrier()
    return out.tolist()


def _line_of(fn, text):
    import inspect
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(src) if text in s)


def test_signals_from_aclshmem_create_tensor_must_be_zeroed_first():
    for values in _launch(_counted, True, world_size=2):
        assert values == [[1], [0]], values
    alloc_line = _line_of(_counted, "aclshmem_create_tensor")
    for values in _launch(_counted, False, world_size=2):
        msgs = [v for v in values if isinstance(v, str)]
        assert msgs, values
        m = msgs[0]
        assert m.startswith("uninitialised read: rank "), m
        assert "libshmem_device.signal_op" in m or "libshmem_device.signal_wait_until" in m, m
        assert f"allocated at test_sanitizer.py:{alloc_line} (shmem.aclshmem_create_tensor" in m, m
        assert "aclshmem_malloc does not zero" in m and "Fix: write it before the first read" in m, m


@triton.jit
def read_then_write(buf, out, N: tl.constexpr, WRITE_FIRST: tl.constexpr):
    i = tl.arange(0, N)
    if WRITE_FIRST:
        tl.store(buf + i, i)
    tl.store(out + i, tl.load(buf + i))


def _native(write_first, poison):
    if poison:
        os.environ["TRITON_DIST_SIM_INIT_CHECK"] = "1"
    try:
        buf = triton_dist.symm_tensor((64,), torch.int32)
    finally:
        os.environ.pop("TRITON_DIST_SIM_INIT_CHECK", None)
    out = torch.zeros(64, dtype=torch.int32)
    try:
        read_then_write[(1,)](buf, out, N=64, WRITE_FIRST=write_first)
    except UninitializedReadError as e:
        return str(e)
    return out.tolist()


def test_the_option_poisons_symm_tensor_and_the_default_zero_fills():
    for values in _launch(_native, False, False):
        assert values[0] == [0] * 64                          # the contract: zero-filled
    for values in _launch(_native, True, True):
        assert values[0] == list(range(64))                   # written before read: clean
    for values in _launch(_native, False, True):
        m = values[0]
        assert isinstance(m, str) and m.startswith("uninitialised read: rank 0 core "), m
        assert "tl.load at test_sanitizer.py:" in m and "(read_then_write)" in m, m
        assert "symm tensor #0 (int32[64]) of rank 0, element 0 ('buf' allocated at test_sanitizer.py:" in m, m
        assert "32 unwritten 8-byte words" in m, m
        assert f"allocated at test_sanitizer.py:{_line_of(_native, 'symm_tensor')} (triton_dist.symm_tensor with " \
               f"TRITON_DIST_SIM_INIT_CHECK=1)" in m, m


# ---- unpaired sync_block_set ---------------------------------------------------------------------------

@triton.jit
def flags(out, EXTRA_SET: tl.constexpr):
    al.sync_block_set("cube", "vector", 2)
    if EXTRA_SET:
        al.sync_block_set("cube", "vector", 2)
    al.sync_block_wait("cube", "vector", 2)
    tl.store(out + tl.program_id(0) + tl.arange(0, 1), tl.full((1,), 1, tl.int32))


def _flags(extra):
    out = torch.zeros(4, dtype=torch.int32)
    try:
        flags[(4,)](out, EXTRA_SET=extra)
    except triton_dist.TritonDistError as e:
        return str(e)
    return out.tolist()


def test_a_set_never_waited_for_is_reported_at_the_end_of_the_kernel():
    for values in _launch(_flags, False):
        assert values[0] == [1, 1, 1, 1]
    set_line = _line_of(flags.fn, "if EXTRA_SET") + 1          # the set left over: the wait took the first
    for values in _launch(_flags, True):
        m = values[0]
        assert isinstance(m, str) and m.startswith("unpaired sync_block_set at the end of the kernel: rank 0 core "), m
        assert f"sync_block_set('cube', 'vector', event_id=2) at test_sanitizer.py:{set_line} (flags): set 1 time " \
               f"more than sync_block_wait('cube', 'vector', 2) waited" in m, m
        assert "Fix: add the matching sync_block_wait('cube', 'vector', 2) on the vector side" in m, m
