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
from triton.language.extra.cann import extension  # noqa: E402 - after triton_dist installs it


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


def _line(fn, text):
    """file:line of the first source line of jit function `fn` containing `text`."""
    import inspect
    src, first = inspect.getsourcelines(fn.fn)
    return f"test_hivm_robust.py:{first + next(i for i, ln in enumerate(src) if text in ln)}"


def _launch(fn, *args):
    return triton_dist.launch(fn, *args, world_size=1, backend="hivm")


def test_a_fault_inside_a_while_loop_ends_the_launch_with_the_fault():
    assert _launch(_count_to, 5).values == [[8, 8]]          # torch's count: 6.0 / 0.75
    with pytest.raises(Exception) as info:
        _launch(_count_to, 40)       # x has 8 elements: the load faults, the sum stays 0 and would spin
    msg = str(info.value)
    assert "LaunchTimeout" not in type(info.value).__name__ and "timed out" not in msg
    assert "out-of-range scalar GM access" in msg and "argument 'x_ptr' (float32[8]): bytes 160..164" in msg
    assert f"{_line(count_to, 'acc += tl.load')} (tl.load)" in msg and "[on rank 0 core " in msg


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
    assert f"Source: {_line(sum_until, 'acc += tl.sum(tl.load')} (tl.load)" in msg        # the kernel line


# -- sync_block_all across blocks (rewrite.blocks_sync, runner._sync_all, waits.calls_library) --------

# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_sync_block_all.py
@triton.jit
def two_phases(x_ptr, ws_ptr, out_ptr, MODE: tl.constexpr, BLOCK: tl.constexpr):
    # phase 1: each block doubles its tile into the workspace; phase 2: it reads the next block's
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(ws_ptr + pid * BLOCK + offs, tl.load(x_ptr + pid * BLOCK + offs) * 2.0)
    extension.sync_block_all(MODE, 3)
    nxt = (pid + 1) % tl.num_programs(0)
    tl.store(out_ptr + pid * BLOCK + offs, tl.load(ws_ptr + nxt * BLOCK + offs) + 1.0)


def _two_phases(n, mode):
    block = 32
    x = torch.randn(n * block, generator=torch.Generator().manual_seed(n))
    ws, out = torch.zeros(n * block), torch.zeros(n * block)
    two_phases[(n,)](x, ws, out, MODE=mode, BLOCK=block)
    return torch.equal(out, (x.view(n, block).roll(-1, 0) * 2.0 + 1.0).flatten())      # torch's answer


@pytest.fixture
def four_cores(monkeypatch):
    """4 vector cores (the ranks are forked: they inherit it), the stall watchdog quick."""
    monkeypatch.setenv("TRITON_DIST_SIM_CORES", "2:4")
    monkeypatch.delenv("TRITON_ALL_BLOCKS_PARALLEL", raising=False)
    from triton_dist.sim import watchdog
    monkeypatch.setattr(watchdog, "STALL_SECONDS", 0.5)


@pytest.mark.parametrize("mode", ["all", "all_vector"])
def test_sync_block_all_across_blocks_runs_compiled_and_agrees_with_torch_and_the_simulator(four_cores, mode):
    for backend in ("sim", "hivm"):
        assert triton_dist.launch(_two_phases, 4, mode, world_size=1, backend=backend).values == [True], backend


def test_sync_block_all_with_more_blocks_than_cores_is_reported_as_the_simulator_reports_it(four_cores):
    reports = {}
    for backend in ("sim", "hivm"):
        with pytest.raises(triton_dist.DeadlockError) as info:
            triton_dist.launch(_two_phases, 5, "all", world_size=1, backend=backend)
        reports[backend] = msg = str(info.value)
        assert "timed out" not in msg
        assert "grid of 5 programs on 4 vector cores: programs 0-3 wait; program 4 waits to be dispatched" in msg
        assert "triton-ascend #1738 \"ext.sync_block_all causes device deadlock\"" in msg
    assert reports["sim"].split("\n")[0] == reports["hivm"].split("\n")[0]



@triton.jit
def dot_then_meet(a_ptr, c_ptr, MODE: tl.constexpr):
    # a mix kernel (the dot on the cube, the add on the vector cores) meeting the other blocks
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, a))
    extension.sync_block_all(MODE, 5)
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.load(c_ptr + r[:, None] * 16 + r[None, :]) + 1.0)


def _dot_then_meet():
    a = torch.randn(16, 16, generator=torch.Generator().manual_seed(0))
    c = torch.zeros(16, 16)
    dot_then_meet[(1,)](a, c, MODE="all_vector")
    return torch.allclose(c, a @ a + 1.0, atol=1e-4)


def test_sync_block_all_in_a_mix_kernel_is_refused_by_name_on_hivm_and_runs_on_the_simulator():
    assert triton_dist.launch(_dot_then_meet, world_size=1, backend="sim").values == [True]
    with pytest.raises(Exception, match=r"sync_block_all in a mix kernel \(cube and vector halves\): the hivm backend "
                                        r"runs it across blocks only in a kernel of one core type"):
        triton_dist.launch(_dot_then_meet, world_size=1, backend="hivm")

# -- the fault message's source lines: only the branch the constexprs select (runner._accesses) ---------

@triton.jit
def pick(idx_ptr, x_ptr, out_ptr, n, MASKED: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    idx = tl.load(idx_ptr + offs)
    if MASKED:
        v = tl.load(x_ptr + idx, mask=idx < n, other=-1.0)
    else:
        v = tl.load(x_ptr + idx)
    tl.store(out_ptr + offs, v)


def _pick(masked, last):
    x = torch.arange(40, dtype=torch.float32)
    idx = torch.arange(16, dtype=torch.int32) * 2
    idx[15] = last
    out = torch.zeros(16)
    pick[(1,)](idx, x, out, 40, MASKED=masked, BLOCK=16)
    return torch.equal(out, torch.where(idx < 40, x[idx.clamp(max=39).long()], torch.tensor(-1.0)))


@pytest.mark.parametrize("masked", [False, True])
def test_a_faults_source_lines_are_those_of_the_branch_the_constexprs_take(masked):
    masked_line, plain_line = _line(pick, "mask=idx < n"), _line(pick, "v = tl.load(x_ptr + idx)\n")
    assert _launch(_pick, masked, 39).values == [True]          # in range: torch's gather
    with pytest.raises(Exception) as info:
        _launch(_pick, masked, 41)                              # one lane past x (masked off when MASKED)
    msg = str(info.value)
    assert "argument 'x_ptr' (float32[40]): bytes 164..168" in msg
    if masked:      # the #2332 class: the masked-off lane is still read, and the message says so
        assert f"Source: {masked_line} (tl.load, masked by `idx < n`: the source keeps this lane off" in msg
        assert plain_line not in msg
    else:           # the load the kernel runs is unmasked: no mask is blamed, the dead branch is not listed
        assert f"Source: {plain_line} (tl.load). " in msg
        assert "masked by" not in msg and masked_line not in msg


# -- tl.device_print on hivm: the template library's print functions (device_print.py) ----------------

@triton.jit
def show(x_ptr, y_ptr, n):
    offs = tl.arange(0, 4)
    tl.device_print("x", tl.load(x_ptr + offs))
    tl.device_print("n", n)
    tl.device_print("n hex", n, hex=True)
    tl.device_print("y", tl.load(y_ptr + tl.arange(0, 2)[:, None] * 3 + tl.arange(0, 4)[None, :] % 3))


def _show():
    import contextlib
    import io
    x = torch.tensor([0.5, -1.25, 3.0, 0.1])
    y = torch.arange(6, dtype=torch.int32).reshape(2, 3) - 2
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        show[(1,)](x, y, -7)
    return buf.getvalue(), x.tolist(), y.tolist()


def test_device_print_runs_compiled_and_prints_the_values_in_the_templates_format():
    (text, x, y), = triton_dist.launch(_show, world_size=1, backend="hivm").values
    lines = text.splitlines()
    # Debug.cpp: the prefix on its own line, then the values with printf's %f / %d / %X, a row per line
    # of a 2-D tile; the expected text is made here from torch's values
    row = ",".join("%f" % float(torch.tensor(v, dtype=torch.float32)) for v in x)
    assert "[" + row + "]" in lines, text
    assert "-7" in lines and "FFFFFFF9" in lines, text
    cols = [0, 1, 2, 0]
    assert "[[" + ",".join(str(y[0][c]) for c in cols) + "]," in lines, text
    assert "[" + ",".join(str(y[1][c]) for c in cols) + "]]" in lines, text
    for prefix in ("x", "n", "n hex", "y"):     # each value follows a line naming it
        assert any(ln.strip().rstrip(":").strip() == prefix for ln in lines), (prefix, text)
