"""Issue 15 §2: physical cores.  A grid runs on the device profile's cores (sim/device.py):
programs are dispatched in order onto free cores, one program per core at a time; vector-only
kernels on vector cores, kernels with tl.dot on AI (cube) cores.  Programs that wait for a
program that cannot be dispatched deadlock, as on the NPU, and the report says so.

Oracles: the hardware rule (evidence B: blocks beyond the physical cores run "in a new round")
applied by hand to small grids on a small core count set with TRITON_DIST_SIM_CORES.
"""
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl

SCHEDULES = [("free", None), ("random", 0), ("random", 1), ("pct", 0), ("pct", 1)]


@pytest.fixture
def four_cores(monkeypatch):
    """4 vector cores, 2 AI (cube) cores (the ranks are forked: they inherit it)."""
    monkeypatch.setenv("TRITON_DIST_SIM_CORES", "2:4")
    from triton_dist.sim import watchdog
    monkeypatch.setattr(watchdog, "STALL_SECONDS", 0.5)


@triton.jit
def independent(out):
    pid = tl.program_id(0)
    tl.store(out + pid * 16 + tl.arange(0, 16), tl.full((16,), 1, tl.int32) * (pid + 1))


def _independent(grid):
    out = torch.zeros(grid * 16, dtype=torch.int32)
    independent[(grid,)](out)
    return out[::16].tolist()


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_grid_of_twice_the_cores_completes(four_cores, schedule, seed):
    res = triton_dist.launch(_independent, 8, world_size=1, schedule=schedule, seed=seed, timeout=60)
    assert res.values[0] == list(range(1, 9))


@triton.jit
def wait_for_last(sig, out, DOT: tl.constexpr):
    pid = tl.program_id(0)
    last = tl.num_programs(0) - 1
    if DOT:                                   # makes it a mix kernel: AI (cube) cores
        a = tl.full((16, 16), 1.0, tl.float32)
        tl.store(out + 16 * pid + tl.arange(0, 16), tl.sum(tl.dot(a, a), axis=0).to(tl.int32))
    if pid == last:
        dl.notify(sig, 0, signal=1, sig_op="set")
    else:
        dl.wait(sig, 1, "gpu", "acquire", waitValue=1)    # every other program waits for the last


def _wait_for_last(grid, dot):
    sig = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.zeros(grid * 16, dtype=torch.int32)
    wait_for_last[(grid,)](sig, out, DOT=dot)
    return sig[0].item()


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_waiting_for_the_last_program_passes_when_all_fit(four_cores, schedule, seed):
    res = triton_dist.launch(_wait_for_last, 4, False, world_size=1, schedule=schedule, seed=seed, timeout=60)
    assert res.values == [1]


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_waiting_for_an_undispatched_program_deadlocks(four_cores, schedule, seed):
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_wait_for_last, 6, False, world_size=1, schedule=schedule, seed=seed, timeout=60)
    text = str(ei.value)
    assert "timed out" not in text, text
    assert ("grid of 6 programs on 4 vector cores: programs 0-3 wait; programs 4-5 wait to be "
            "dispatched") in text, text


@pytest.mark.parametrize("schedule,seed", [("free", None), ("pct", 0)])
def test_mix_kernels_run_on_ai_cores(four_cores, schedule, seed):
    """A kernel with tl.dot: a block takes one AI core (1 cube + 2 vector), so 3 programs do not
    fit 2 AI cores, though they would fit the 4 vector cores."""
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_wait_for_last, 3, True, world_size=1, schedule=schedule, seed=seed, timeout=60)
    assert ("grid of 3 programs on 2 AI (cube) cores: programs 0-1 wait; program 2 waits to be "
            "dispatched") in str(ei.value), str(ei.value)
    res = triton_dist.launch(_wait_for_last, 2, True, world_size=1, schedule=schedule, seed=seed, timeout=60)
    assert res.values == [1]


def test_one_core_program_zero_waits_for_program_one(monkeypatch):
    monkeypatch.setenv("TRITON_DIST_SIM_CORES", "1")
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_wait_for_last, 2, False, world_size=1, schedule="random", seed=0, timeout=60)
    assert "grid of 2 programs on 1 vector cores: program 0 waits; program 1 waits to be dispatched" \
        in str(ei.value), str(ei.value)


def test_default_profile_is_an_atlas_a2(monkeypatch):
    from triton_dist.sim import device
    monkeypatch.delenv("TRITON_DIST_SIM_CORES", raising=False)
    monkeypatch.delenv("TRITON_DIST_SIM_DEVICE", raising=False)
    d = device.current()
    assert (d.cube, d.vector) == (24, 48)                 # 910B2, NPUTargetSpec.td
    monkeypatch.setenv("TRITON_DIST_SIM_DEVICE", "910B3")
    assert (device.current().cube, device.current().vector) == (20, 40)
    monkeypatch.setenv("TRITON_DIST_SIM_CORES", "6")
    assert (device.current().cube, device.current().vector) == (3, 6)
    for bad in ("0", "x", "1:2:3", "-4"):
        monkeypatch.setenv("TRITON_DIST_SIM_CORES", bad)
        with pytest.raises(triton_dist.TritonDistError, match="TRITON_DIST_SIM_CORES"):
            device.current()
    monkeypatch.delenv("TRITON_DIST_SIM_CORES")
    monkeypatch.setenv("TRITON_DIST_SIM_DEVICE", "H100")
    with pytest.raises(triton_dist.TritonDistError, match="not a known part"):
        device.current()


def test_threads_are_bounded_by_the_cores(four_cores):
    """A grid of 200 programs runs on 4 core threads, not 200."""
    import threading

    def body():
        seen = []
        real = threading.Thread.start

        def start(self):
            seen.append(self.name)
            return real(self)
        threading.Thread.start = start
        try:
            out = _independent(200)
        finally:
            threading.Thread.start = real
        return out, len([n for n in seen if n.startswith("core")])
    res = triton_dist.launch(body, world_size=1, timeout=60)
    out, threads = res.values[0]
    assert out == list(range(1, 201))
    assert threads == 4


@triton.jit
def beat_while_waiting(flag, beat):
    # program 0 polls a flag that program 3 sets, storing a heartbeat every round: a poll the
    # spin watch never calls a wait (it writes), so only LAZY_START_SECONDS starts the other cores
    # (a block load: it reads memory, where a scalar load would read its core's cached line)
    pid = tl.program_id(0)
    two = tl.arange(0, 2)
    if pid == 0:
        i = 0
        while tl.sum(tl.load(flag + two)) == 0:
            i += 1
            tl.store(beat, i)
    if pid == tl.num_programs(0) - 1:
        tl.store(flag + two, tl.full((2,), 1, tl.int32), mask=two == 0)


def _beat_while_waiting():
    flag = triton_dist.symm_tensor((2,), torch.int32)
    beat = triton_dist.symm_tensor((1,), torch.int32)
    beat_while_waiting[(4,)](flag, beat)
    return flag[0].item(), beat.item() > 0


def test_free_starts_every_core_even_under_a_poll_that_writes(four_cores):
    """The free schedule starts a core's thread when the running ones wait or end (sim/
    schedulers/free.py); a poll that also writes is neither, and still sees program 3 run."""
    res = triton_dist.launch(_beat_while_waiting, world_size=1, schedule="free", timeout=60)
    assert res.values[0] == (1, True)
