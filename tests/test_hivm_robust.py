"""The hivm backend when something goes wrong inside the compiled kernel (issue 33).

A failed call of the compiled code (a fault, a template the backend lacks) cannot unwind through
native code: the block goes on to its return with that call's results zeroed.  A `while` loop whose
condition depends on them would spin until the launch timeout, which says "no deadlock detected"
instead of the cause; each loop's condition also asks whether the launch failed
(backend_ascend/cpu_run/rewrite.py loop_aborts, runner.Native.abort), so the first failure is
what the launch reports.  The launch timeout is the bound here (no timing assert): without the
abort the failing launches below end in LaunchTimeoutError."""
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
def count_to(x_ptr, out_ptr, idx, limit):
    # adds x[idx] until the sum reaches limit: the loop's condition depends on the scalar load
    acc = 0.0
    n = 0
    while acc < limit:
        acc += tl.load(x_ptr + idx)
        n += 1
    tl.store(out_ptr + tl.program_id(0), n)


def _count_to(idx):
    x = torch.full((8,), 0.75)
    out = torch.zeros(2, dtype=torch.int32)
    count_to[(2,)](x, out, idx, 6.0)
    return out.tolist()


def _launch(fn, *args):
    return triton_dist.launch(fn, *args, world_size=1, backend="hivm")


def test_a_fault_inside_a_while_loop_ends_the_launch_with_the_fault():
    assert _launch(_count_to, 5).values == [[8, 8]]          # torch's count: 6.0 / 0.75
    with pytest.raises(Exception) as info:
        _launch(_count_to, 40)       # x has 8 elements: the load faults, the sum stays 0 and would spin
    msg = str(info.value)
    assert "LaunchTimeout" not in type(info.value).__name__ and "timed out" not in msg
    assert "out-of-range scalar GM access" in msg and "argument 'x_ptr' (float32[8]): bytes 160..164" in msg
    assert "test_hivm_robust.py:34 (tl.load)" in msg and "[on rank 0 core " in msg


@triton.jit
def sum_until(x_ptr, out_ptr, limit, BLOCK: tl.constexpr):
    # a tile load and a reduction (template calls) in the loop whose condition they decide
    offs = tl.arange(0, BLOCK)
    acc = 0.0
    n = 0
    while acc < limit:
        acc += tl.sum(tl.load(x_ptr + offs))
        n += 1
    tl.store(out_ptr, n)


class PlantedFault(triton_dist.TritonDistError):
    pass


def _sum_until(plant):
    if plant:       # in this rank's process: the tile load's template fails, as a missing or faulting one would
        from triton_dist.backend_ascend.cpu_run import templates
        handler = templates.handler

        def failing(name, params):
            fn = handler(name, params)
            if fn is None or not name.startswith("load_gm_to_ubuf"):
                return fn

            def fail(*_):
                raise PlantedFault("planted: the tile load failed")
            return fail
        templates.handler = failing
    x = torch.full((32,), 0.25)
    out = torch.zeros(1, dtype=torch.int32)
    sum_until[(1,)](x, out, 20.0 if plant else 21.0, BLOCK=32)   # another limit: another build, after the plant
    return out.item()


def test_a_failed_template_call_inside_a_while_loop_ends_the_launch_with_it():
    assert _launch(_sum_until, False).values == [3]           # torch's count: ceil(21 / 8)
    with pytest.raises(Exception) as info:
        _launch(_sum_until, True)
    msg = str(info.value)
    assert "PlantedFault" in msg and "planted: the tile load failed" in msg and "timed out" not in msg
    assert "kernel sum_until, block 0 on rank 0 core 0" in msg and "the failing call: load_gm_to_ubuf_1d_float" in msg
