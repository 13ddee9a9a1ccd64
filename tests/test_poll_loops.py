"""Issue 26 item 2: no false timeout or deadlock under any schedule.

A poll that counts its rounds (`rounds += 1`) changes nothing the loop branches on: it
spins all the same (sim/spin.py, sim/loop_state.py), and PCT never starves the task it
waits for.  Two-sided: the correct handshake passes 50 pct seeds; its twin that never
sets the flag is reported as a deadlock (with the poll's line), not as a timeout.

Oracles: the handshake is correct on any machine (the producer sets the flag after its
data, the consumer reads the data after seeing the flag), so any failure is the
simulator's; the twin can never finish, so anything but a deadlock report is wrong.
"""
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm

LOADS = 200          # the producer's loads: many more steps than PCT's change points cover (below)


@pytest.fixture
def short_pct(monkeypatch):
    """PCT's change points fall among the first 32 steps instead of the first thousands, so a
    producer of a few hundred loads outlives them as the issue's 4500-load one outlives
    today's (the ranks are forked from this process and inherit it)."""
    from triton_dist.sim.schedulers import pct
    monkeypatch.setattr(pct, "STEPS_ESTIMATE", 32)


@pytest.fixture
def quick_watchdog(monkeypatch):
    from triton_dist.sim import watchdog
    monkeypatch.setattr(watchdog, "STALL_SECONDS", 0.5)


@triton.jit
def counting_handshake(flag, data, out, LOADS: tl.constexpr, SETS_FLAG: tl.constexpr,
                       LIMIT: tl.constexpr):
    if dl.rank() == 0:
        acc = 0
        for i in range(LOADS):                      # a producer that reads for a long time
            acc += tl.load(data + (i % 16))
        tl.store(data + 16, acc)
        shm.fence()
        if SETS_FLAG:
            tl.atomic_xchg(flag, 1, sem="release")
    else:
        r = dl.symm_at(flag, 0)
        rounds = 0
        if LIMIT == 0:
            while tl.atomic_add(r, 0, sem="acquire") == 0:
                rounds += 1                         # counted, never branched on
        else:
            while (tl.atomic_add(r, 0, sem="acquire") == 0) & (rounds < LIMIT):
                rounds += 1                         # branched on: a bounded wait
        tl.store(out, tl.load(dl.symm_at(data, 0) + 16))


def _counting(sets_flag, limit=0):
    flag = triton_dist.symm_tensor((16,), torch.int32)
    data = triton_dist.symm_tensor((32,), torch.int32)
    data[:16] = 1
    out = torch.full((1,), -1, dtype=torch.int32)
    triton_dist.barrier()
    counting_handshake[(1,)](flag, data, out, LOADS=LOADS, SETS_FLAG=sets_flag, LIMIT=limit)
    triton_dist.barrier()
    return out.item()


def test_counting_poll_handshake_passes_50_pct_seeds(short_pct):
    for seed in range(50):
        res = triton_dist.launch(_counting, True, world_size=2, schedule="pct", seed=seed, timeout=120)
        assert res.values[1] == LOADS, (seed, res.values)   # the consumer read the producer's sum


@pytest.mark.parametrize("schedule,seed", [("random", 0), ("random", 1), ("free", None)])
def test_counting_poll_handshake_other_schedules(schedule, seed):
    res = triton_dist.launch(_counting, True, world_size=2, schedule=schedule, seed=seed, timeout=120)
    assert res.values[1] == LOADS


def test_bounded_poll_does_not_starve_its_producer(short_pct):
    """`while flag == 0 and rounds < LIMIT` branches on its counter: not a spin (it could end by
    itself), but it only polls, so PCT runs the producer before it."""
    for seed in range(10):
        res = triton_dist.launch(_counting, True, 10 ** 9, world_size=2, schedule="pct", seed=seed, timeout=120)
        assert res.values[1] == LOADS, (seed, res.values)


@pytest.mark.parametrize("schedule,seed", [("pct", 0), ("pct", 1), ("pct", 2), ("random", 0), ("free", None)])
def test_counting_poll_of_a_flag_nobody_sets_is_a_deadlock(short_pct, quick_watchdog, schedule, seed):
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_counting, False, world_size=2, schedule=schedule, seed=seed, timeout=90)
    text = str(ei.value)
    assert "timed out" not in text, text
    assert "rank 1 core 0: polls with atomics at test_poll_loops.py:" in text, text
    assert "sees 0 every time" in text, text
