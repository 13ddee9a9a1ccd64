"""The NPU's faults where the compiled code leaves the buffers, for the accesses the compiler
emits inline (backend hivm): scalar global loads and stores (`memref.load`/`memref.store` of a
gm memref after convert-hivm-to-std), checked against the live buffers like the template calls'
copies (backend_ascend/cpu_run/rewrite.py gm_scalar_accesses, memory.py gm_scalar_fault)."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import triton_dist


def _missing():
    from triton_dist.backend_ascend.cpu_run.backend import HivmBackend
    return HivmBackend.missing()


pytestmark = pytest.mark.skipif(bool(_missing()), reason=f"backend hivm cannot run here: {'; '.join(_missing())}")


@triton.jit
def gather_one(idx_ptr, x_ptr, out_ptr):
    # one program per output: a scalar index, then a scalar load through it (both emitted inline
    # as memref.load of a gm memref, no template call)
    i = tl.load(idx_ptr + tl.program_id(0))
    tl.store(out_ptr + tl.program_id(0), tl.load(x_ptr + i) * 2.0)


@triton.jit
def gather_many(idx_ptr, x_ptr, out_ptr, n, MASKED: tl.constexpr, BLOCK: tl.constexpr):
    # an indirect load: the 3.2.0 adapter emits it as a loop of scalar loads (memref.load of gm)
    offs = tl.arange(0, BLOCK)
    idx = tl.load(idx_ptr + offs)
    if MASKED:
        v = tl.load(x_ptr + idx, mask=idx < n, other=-1.0)
    else:
        v = tl.load(x_ptr + idx)
    tl.store(out_ptr + offs, v)


def _gather_many(idx, masked, n=40):
    x = torch.arange(40, dtype=torch.float32) * 0.5
    out = torch.full((16,), float("nan"))
    gather_many[(1,)](idx, x, out, n, MASKED=masked, BLOCK=16)
    ref = torch.where(idx < n, x[idx.clamp(max=39).long()], torch.tensor(-1.0))
    return torch.equal(out, ref)


def _gather(last):
    x = torch.arange(40, dtype=torch.float32) * 0.5
    idx = torch.tensor([3, 0, 17, last], dtype=torch.int32)
    out = torch.full((4,), float("nan"))
    gather_one[(4,)](idx, x, out)
    return torch.equal(out, x[idx.long()] * 2.0)


def _launch(fn, *args):
    return triton_dist.launch(fn, *args, world_size=1, backend="hivm")


def test_a_scalar_load_off_the_end_faults_and_its_in_bounds_twin_agrees_with_torch():
    with pytest.raises(Exception) as info:
        _launch(_gather, 40)                   # x has 40 elements: index 40 is the first byte past it
    msg = str(info.value)
    assert "out-of-range scalar GM access" in msg and "scalar load (memref.load of 4 bytes" in msg
    assert "argument 'x_ptr' (float32[40]): bytes 160..164 of a 160-byte buffer" in msg
    assert "block 3" in msg and "test_hivm_faults.py:" in msg       # the program, and the source line
    assert _launch(_gather, 39).values == [True]


def test_an_indirect_load_with_an_index_off_the_end_faults_and_in_bounds_agrees_with_torch():
    idx = torch.arange(16, dtype=torch.int32) * 2 + 3        # 3, 5, ..., 33: inside x
    assert _launch(_gather_many, idx, False).values == [True]
    bad = idx.clone()
    bad[11] = 41                                             # one lane reads 4 bytes past x's end + 1 element
    with pytest.raises(Exception) as info:
        _launch(_gather_many, bad, False)
    msg = str(info.value)
    assert "out-of-range scalar GM access" in msg
    assert "argument 'x_ptr' (float32[40]): bytes 164..168 of a 160-byte buffer" in msg


def test_a_masked_indirect_load_still_reads_its_masked_off_lanes_and_faults():
    # triton-ascend #2332's class, for a gather: the 3.2.0 adapter loads every lane in its scalar
    # loop and applies the mask afterwards (kernel.ttadapter-out.mlir: scf.for of memref.load, then
    # arith.select), so an index the mask keeps off is still read
    bad = torch.arange(16, dtype=torch.int32) * 2 + 3
    bad[11] = 41                                             # masked off by idx < n
    with pytest.raises(Exception) as info:
        _launch(_gather_many, bad, True)
    msg = str(info.value)
    assert "out-of-range scalar GM access" in msg and "bytes 164..168 of a 160-byte buffer" in msg
    assert "masked by `idx < n`: the source keeps this lane off, the compiled code still accesses it" in msg
    # the twin: masked-off lanes whose addresses stay inside x (n = 20 of its 40): they are read,
    # harmlessly, and the select gives `other` as torch does
    assert _launch(_gather_many, torch.arange(16, dtype=torch.int32) * 2 + 3, True, 20).values == [True]
