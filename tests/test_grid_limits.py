"""Issue 34 §1-2: the NPU's grid limit, TRITON_ALL_BLOCKS_PARALLEL, and residency (sim/grid_limits.py).

Oracles: triton-ascend's own check (a grid product above 65535 is refused unless
TRITON_ALL_BLOCKS_PARALLEL is set; triton_patch/python/triton_patch/runtime/jit.py:692-694 at
0f7e0edb5), AscendNPU-IR's blockify loop (core p runs programs p, p+P, ...:
AutoBlockifyParallelLoop.cpp:78-172 at 52f96a13) applied by hand to small grids on 4 cores, and
torch for the results of the kernels that must pass.
"""
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton.language.extra.cann import extension as al  # noqa: E402 - after triton_dist installs it

SCHEDULES = [("free", None), ("random", 0), ("random", 1), ("pct", 0), ("pct", 1), ("explore", 0), ("explore", 1)]
TWIN_SCHEDULES = [("free", None), ("random", 0), ("pct", 0), ("explore", 0)]     # the twins: fewer, to keep it fast


@pytest.fixture
def four_cores(monkeypatch):
    """4 vector cores, 2 AI (cube) cores (the ranks are forked: they inherit it)."""
    monkeypatch.setenv("TRITON_DIST_SIM_CORES", "2:4")
    monkeypatch.delenv("TRITON_ALL_BLOCKS_PARALLEL", raising=False)
    from triton_dist.sim import watchdog
    monkeypatch.setattr(watchdog, "STALL_SECONDS", 0.5)


@triton.jit
def touch(out):
    pid = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    tl.store(out + pid, pid + 1)


def _touch(grid):
    out = torch.zeros(grid[0] * grid[1], dtype=torch.int32)
    touch[grid](out)
    return out


# -- §1: the grid limit ------------------------------------------------------------------------------

@pytest.mark.parametrize("grid", [(65536, 1), (256, 257)])
def test_grid_over_65535_fails_as_on_the_npu(four_cores, grid):
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_touch, grid, world_size=1, timeout=60)
    text = str(ei.value)
    assert "grid should be less than 65536! You can try \"export TRITON_ALL_BLOCKS_PARALLEL=1\"" in text, text
    assert "for pid in range(tl.program_id(0), total, tl.num_programs(0))" in text, text
    assert "TritonDistError" in text or "RuntimeError" in text, text


def test_grid_of_65535_is_not_refused(four_cores):
    """The boundary: 65535 programs pass the check (checked without running them: the check is
    the first thing a launch does)."""
    from triton_dist.sim import grid_limits
    grid_limits.check("k", (65535, 1, 1))
    grid_limits.check("k", (255, 257, 1))
    with pytest.raises(triton_dist.TritonDistError, match="grid should be less than 65536"):
        grid_limits.check("k", (65536, 1, 1))


def test_a_value_other_than_1_or_true_passes_the_check_but_not_the_runtime(four_cores, monkeypatch):
    from triton_dist.sim import grid_limits
    monkeypatch.setenv("TRITON_ALL_BLOCKS_PARALLEL", "false")
    with pytest.raises(triton_dist.TritonDistError, match="coreDim=65536 can't be greater than UINT16_MAX"):
        grid_limits.check("k", (65536, 1, 1))
    for on in ("1", "true", "TRUE"):
        monkeypatch.setenv("TRITON_ALL_BLOCKS_PARALLEL", on)
        grid_limits.check("k", (65536, 1, 1))
        assert grid_limits.looped()


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_all_blocks_parallel_runs_every_program_once(four_cores, monkeypatch, schedule, seed):
    """10 programs on 4 cores, each core looping: every program runs, once (torch's arange)."""
    monkeypatch.setenv("TRITON_ALL_BLOCKS_PARALLEL", "1")
    res = triton_dist.launch(_touch, (10, 1), world_size=1, schedule=schedule, seed=seed, timeout=60)
    assert torch.equal(res.values[0], torch.arange(1, 11, dtype=torch.int32))


@triton.jit
def wait_for_last(sig, out):
    pid = tl.program_id(0)
    last = tl.num_programs(0) - 1
    if pid == last:
        dl.notify(sig, 0, signal=1, sig_op="set")
    elif pid == 0:
        dl.wait(sig, 1, "gpu", "acquire", waitValue=1)    # program 0 waits for the last one
    tl.store(out + pid, pid + 1)


def _wait_for_last(grid):
    sig = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.zeros(grid, dtype=torch.int32)
    wait_for_last[(grid,)](sig, out)
    return out


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_order_sensitive_kernel_passes_without_the_loop(four_cores, schedule, seed):
    """5 programs on 4 cores, program 0 waits for program 4: a core that frees up takes program 4."""
    res = triton_dist.launch(_wait_for_last, 5, world_size=1, schedule=schedule, seed=seed, timeout=60)
    assert torch.equal(res.values[0], torch.arange(1, 6, dtype=torch.int32))


@pytest.mark.parametrize("schedule,seed", TWIN_SCHEDULES)
def test_order_sensitive_kernel_deadlocks_under_all_blocks_parallel(four_cores, monkeypatch, schedule, seed):
    """The same launch with the loop: program 4 runs on core 0 after program 0, which waits for it."""
    monkeypatch.setenv("TRITON_ALL_BLOCKS_PARALLEL", "1")
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_wait_for_last, 5, world_size=1, schedule=schedule, seed=seed, timeout=60)
    text = str(ei.value)
    assert "timed out" not in text, text
    assert "TRITON_ALL_BLOCKS_PARALLEL=1: the grid of 5 programs runs on 4 vector cores" in text, text
    assert "program 0 on core 0 waits; still to run: program 4 after program 0 on core 0" in text, text
    assert "Otherwise, a deadlock may occur." in text, text


# -- §2: sync_block_all with blocks not resident, and under the loop --------------------------------

@triton.jit
def rotate(x, out):
    """Every program writes its slot, meets the others, then reads its neighbour's."""
    pid = tl.program_id(0)
    n = tl.num_programs(0)
    tl.store(x + pid, pid + 1)
    al.sync_block_all("all_vector", 0)
    tl.store(out + pid, tl.load(x + (pid + 1) % n))


def _rotate(grid):
    x = torch.zeros(grid, dtype=torch.int32)
    out = torch.zeros(grid, dtype=torch.int32)
    rotate[(grid,)](x, out)
    return out


@pytest.mark.parametrize("looped", [False, True])
@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_sync_block_all_of_as_many_blocks_as_cores_passes(four_cores, monkeypatch, schedule, seed, looped):
    if looped:      # grid = cores: the loop runs one round, the same launch
        monkeypatch.setenv("TRITON_ALL_BLOCKS_PARALLEL", "1")
    res = triton_dist.launch(_rotate, 4, world_size=1, schedule=schedule, seed=seed, timeout=60)
    assert torch.equal(res.values[0], torch.roll(torch.arange(1, 5, dtype=torch.int32), -1))


@pytest.mark.parametrize("schedule,seed", TWIN_SCHEDULES)
def test_sync_block_all_with_a_block_beyond_the_cores_is_the_device_deadlock_of_1738(four_cores, schedule, seed):
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_rotate, 5, world_size=1, schedule=schedule, seed=seed, timeout=60)
    text = str(ei.value)
    assert "timed out" not in text, text
    assert "grid of 5 programs on 4 vector cores: programs 0-3 wait; program 4 waits to be dispatched" in text, text
    assert "triton-ascend #1738 \"ext.sync_block_all causes device deadlock\"" in text, text
    assert "launch at most as many blocks as cores and loop over the work inside the kernel" in text, text


@pytest.mark.parametrize("schedule,seed", TWIN_SCHEDULES)
def test_sync_block_all_under_the_loop_with_a_short_round_deadlocks(four_cores, monkeypatch, schedule, seed):
    """5 programs on 4 looping cores: core 0 meets the barrier a second time (program 4), the others
    have finished."""
    monkeypatch.setenv("TRITON_ALL_BLOCKS_PARALLEL", "1")
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_rotate, 5, world_size=1, schedule=schedule, seed=seed, timeout=60)
    text = str(ei.value)
    assert "timed out" not in text, text
    assert "program 4 on core 0 waits; cores 1, 2, 3 finished; sync_block_all is then a barrier of the 4 cores " \
           "launched" in text, text
    assert "Otherwise, a deadlock may occur." in text, text


@triton.jit
def split_rotate(x, out, NB: tl.constexpr):
    """A cube+vector block (it hands a flag): the cube writes the block's slot, every core of every
    block meets, then the vector core reads the next block's slot."""
    pid = tl.program_id(0)
    lane = tl.arange(0, 1)
    with al.scope(core_mode="cube"):
        tl.store(x + pid + lane, tl.full((1,), 10, tl.int32) + pid)
        al.sync_block_set("cube", "vector", 1)
    al.sync_block_wait("cube", "vector", 1)
    al.sync_block_all("all", 0)
    tl.store(out + pid + lane, tl.load(x + (pid + 1) % NB + lane))


def _split_rotate(nb):
    x = triton_dist.symm_tensor((nb,), torch.int32)
    out = torch.zeros(nb, dtype=torch.int32)
    split_rotate[(nb,)](x, out, NB=nb)
    return out


@pytest.mark.parametrize("schedule,seed", [("free", None), ("random", 0), ("pct", 1), ("explore", 0)])
def test_split_blocks_in_sync_block_all_as_many_as_ai_cores_pass_one_more_is_1738(four_cores, schedule, seed):
    res = triton_dist.launch(_split_rotate, 2, world_size=1, schedule=schedule, seed=seed, timeout=60)
    assert torch.equal(res.values[0], torch.roll(torch.arange(10, 12, dtype=torch.int32), -1))
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_split_rotate, 3, world_size=1, schedule=schedule, seed=seed, timeout=60)
    text = str(ei.value)
    assert "grid of 3 blocks on 2 AI cores" in text, text
    assert "triton-ascend #1738 \"ext.sync_block_all causes device deadlock\"" in text, text


@pytest.mark.slow
def test_a_grid_over_65535_runs_under_all_blocks_parallel(request, monkeypatch):
    """256x257 = 65792 programs on the 48 vector cores of the default profile, each core looping:
    every program runs once (torch's arange).  49 s at load average 14 on 2 cores: run with -m slow."""
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("slow (about 50 s): run with -m slow")
    monkeypatch.delenv("TRITON_DIST_SIM_CORES", raising=False)
    monkeypatch.setenv("TRITON_ALL_BLOCKS_PARALLEL", "1")
    res = triton_dist.launch(_touch, (256, 257), world_size=1, timeout=600)
    assert torch.equal(res.values[0], torch.arange(1, 256 * 257 + 1, dtype=torch.int32))
