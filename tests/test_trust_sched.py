"""Issue 14 items 1, 2, 5, 9: the simulator's deadlock verdicts are trustworthy.

- item 1: grids larger than any fixed number of status-board slots never alias (a waiting
  program must not overwrite the record of one that computes);
- item 2: re-reading one scalar (a scale factor) while computing is not a spin; a spin on a
  stale cached flag still is (with its kernel line);
- item 5: polling memory with atomics is a wait: a correct atomic handshake finishes under
  every schedule, an atomic poll of a flag nobody writes is reported quickly (line, address,
  value), not after the launch timeout;
- item 9: the first error of a launch ends it at once, even while another core computes.

Oracles: what each kernel computes by hand (sums, flags), and which kernels are correct
(they terminate on any machine) or can never finish.
"""
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm

SCHEDULES = [("free", None), ("random", 0), ("random", 1), ("pct", 0), ("pct", 1)]


@pytest.fixture
def quick_watchdog(monkeypatch):
    """The free schedule's watchdog declares a deadlock after 0.5 s of no change instead of 3 s:
    a false alarm shows up sooner, and a true one is reported sooner."""
    from triton_dist.sim import watchdog
    monkeypatch.setattr(watchdog, "STALL_SECONDS", 0.5)


# ---- item 1: no fixed slot limit --------------------------------------------------------------

@triton.jit
def long_first_program(buf, sig, out, WAITER: tl.constexpr, ROUNDS: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, 16)
    if pid == 0:
        for i in range(ROUNDS):                   # computes for a while, then signals
            tl.store(buf + offs, tl.load(buf + offs) + 1)
        dl.notify(sig, 0, signal=1, sig_op="set")
    elif pid == WAITER:
        dl.wait(sig, 1, "gpu", "acquire", waitValue=1)
        tl.store(out, tl.load(buf))
    else:
        tl.store(out + pid * 16, pid)            # a 64-byte line per program (scalar stores are cached)


def _wide_grid(grid, waiter, rounds):
    buf = triton_dist.symm_tensor((16,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.zeros(grid * 16, dtype=torch.float32)
    long_first_program[(grid,)](buf, sig, out, WAITER=waiter, ROUNDS=rounds)
    return out[0].item(), out[16::16].tolist(), waiter


@pytest.mark.parametrize("cores", [None, "1024"])
def test_grid_over_512_programs_is_no_deadlock(quick_watchdog, monkeypatch, cores):
    """Program 512 waits for program 0, which computes: correct on any number of cores (the
    waiter is dispatched after program 0 on 48 cores; all run at once on 1024)."""
    if cores:
        monkeypatch.setenv("TRITON_DIST_SIM_CORES", cores)
    rounds = 3000                     # program 0 computes for well over the watchdog's 0.5 s
    res = triton_dist.launch(_wide_grid, 600, 512, rounds, world_size=1, timeout=120)
    first, rest, waiter = res.values[0]
    assert first == rounds            # program 0's result, stored by the waiter after its signal
    assert rest == [0.0 if p == waiter else float(p) for p in range(1, 600)]


# ---- item 2: re-reading a scalar is not spinning ---------------------------------------------------

@triton.jit
def scale_loop(scale, out, sig, N: tl.constexpr):
    acc = 1.0
    total = 0.0
    for i in range(N):
        s = tl.load(scale)             # the same address and value every round
        acc = acc * s                  # s == 1: acc never changes either
        total += s * i
    tl.store(out, total + acc)
    dl.notify(sig, 1, signal=1, sig_op="set")


@triton.jit
def wait_for_scale(sig, out):
    dl.wait(sig, 1, "sys", "acquire", waitValue=1)
    tl.store(out, 1.0)


def _rescale(n):
    scale = triton_dist.symm_tensor((16,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    scale.fill_(1.0)
    out = torch.zeros(1, dtype=torch.float32)
    triton_dist.barrier()
    if triton_dist.rank() == 0:
        scale_loop[(1,)](scale, out, sig, N=n)
    else:
        wait_for_scale[(1,)](sig, out)
    return out.item()


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_rereading_a_scale_factor_is_not_a_spin(quick_watchdog, schedule, seed):
    n = 40 if schedule != "free" else 3000   # free: long enough for the watchdog to look
    res = triton_dist.launch(_rescale, n, world_size=2, schedule=schedule, seed=seed, timeout=120)
    assert res.values == [sum(range(n)) + 1.0, 1.0]


@triton.jit
def _flag_of(f):
    return tl.load(f)


@triton.jit
def stale_two_flags(f1, f2, go):
    if dl.rank() == 1:
        tl.load(f1)                                # caches both lines while they are 0
        tl.load(f2)
        dl.notify(go, 0, signal=1, sig_op="set")
        while _flag_of(f1) + tl.load(f2) < 2:      # two plain loads, one in a helper
            pass
    else:
        dl.wait(go, 1, "sys", "acquire", waitValue=1)
        dl.notify(f1, 1, signal=1, sig_op="set")
        dl.notify(f2, 1, signal=1, sig_op="set")


def _stale_two():
    f1 = triton_dist.symm_tensor((16,), torch.int32)
    f2 = triton_dist.symm_tensor((16,), torch.int32)
    go = triton_dist.symm_tensor((16,), torch.int32)
    stale_two_flags[(1,)](f1, f2, go)


@pytest.mark.parametrize("schedule,seed", [("free", None), ("random", 3), ("pct", 3)])
def test_spin_on_stale_flags_is_still_reported(quick_watchdog, schedule, seed):
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_stale_two, world_size=2, schedule=schedule, seed=seed, timeout=60)
    text = str(ei.value)
    assert "rank 1 core 0: spins on plain scalar loads at test_trust_sched.py:" in text, text
    assert "timed out" not in text


# ---- item 5: atomic polls are waits -------------------------------------------------------------

@triton.jit
def atomic_handshake(flag, data, out, USE_CAS: tl.constexpr):
    if dl.rank() == 0:
        for i in range(8):
            tl.store(data + tl.arange(0, 16), tl.full((16,), i, tl.int32))
        # the stores are DMAs in flight, and nothing is known to order an atomic after them
        # (docs/device_model.md): fence first, as a kernel must on the NPU
        shm.fence()
        tl.atomic_xchg(flag, 1)                              # release the consumer
    else:
        r = dl.symm_at(flag, 0)
        if USE_CAS:
            while tl.atomic_cas(r, 1, 2) != 1:               # spins until it takes the flag
                pass
        else:
            while tl.atomic_add(r, 0) != 1:                  # polls with an atomic that adds nothing
                pass
        tl.store(out, tl.load(dl.symm_at(data, 0) + 3))


def _handshake(use_cas):
    flag = triton_dist.symm_tensor((16,), torch.int32)
    data = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.full((1,), -1, dtype=torch.int32)
    triton_dist.barrier()
    atomic_handshake[(1,)](flag, data, out, USE_CAS=use_cas)
    triton_dist.barrier()
    return out.item(), flag[0].item()


@pytest.mark.parametrize("use_cas", [True, False])
@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_atomic_spin_handshake_finishes(schedule, seed, use_cas):
    res = triton_dist.launch(_handshake, use_cas, world_size=2, schedule=schedule, seed=seed, timeout=60)
    assert res.values[1][0] == 7                       # the last value rank 0 stored before the flag
    assert res.values[0][1] == (2 if use_cas else 1)   # the CAS took the flag (1 -> 2)


@triton.jit
def atomic_poll_forever(flag, USE_CAS: tl.constexpr):
    if USE_CAS:
        while tl.atomic_cas(flag, 1, 2) != 1:     # nobody ever sets 1
            pass
    else:
        while tl.atomic_add(flag, 0) != 1:
            pass


def _poll_forever(use_cas):
    flag = triton_dist.symm_tensor((16,), torch.int32)
    flag[0] = 5
    atomic_poll_forever[(1,)](flag, USE_CAS=use_cas)


@pytest.mark.parametrize("use_cas", [True, False])
@pytest.mark.parametrize("schedule,seed", [("free", None), ("random", 0), ("pct", 0)])
def test_atomic_poll_nobody_writes_is_a_deadlock(quick_watchdog, schedule, seed, use_cas):
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_poll_forever, use_cas, world_size=1, schedule=schedule, seed=seed, timeout=60)
    text = str(ei.value)
    assert "timed out" not in text, text
    assert "rank 0 core 0: polls with atomics at test_trust_sched.py:" in text, text
    assert "symm tensor #0" in text and "sees 5 every time" in text, text


# ---- item 9: the first error ends the launch ------------------------------------------------------

@triton.jit
def one_fails_one_computes(buf, N: tl.constexpr):
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(buf + 1000000, 1.0)               # far outside every buffer
    else:
        x = 0.0
        for i in range(N):                         # register math for much longer than the timeout
            x = x * 0.5 + 1.0
        tl.store(buf + pid, x)


def _fails_while_busy():
    buf = torch.zeros(16, dtype=torch.float32)
    one_fails_one_computes[(2,)](buf, N=10 ** 8)


@pytest.mark.parametrize("schedule,seed", [("free", None)])
def test_first_error_ends_the_launch(schedule, seed):
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_fails_while_busy, world_size=2, schedule=schedule, seed=seed, timeout=30)
    assert "test_trust_sched.py:" in ei.value.message, ei.value.message


class _SlowToPickle:
    """Pickling it takes a second: inside all_gather_object, while every peer already waits."""

    def __reduce__(self):
        import time
        time.sleep(1.0)
        return (int, (7,))


def _slow_host_collective():
    import torch.distributed as dist
    out = [None] * triton_dist.world_size()
    dist.all_gather_object(out, _SlowToPickle() if triton_dist.rank() == 0 else 7)
    return out


@pytest.mark.parametrize("schedule", ["free", "pct"])
def test_ranks_all_in_a_slow_host_collective_are_no_deadlock(schedule, monkeypatch):
    # Every rank sits in one gloo collective with the status board unchanged for longer than
    # the watchdog's window: gloo completes it (or fails it at its timeout), so it is no
    # deadlock.  Before: "no rank can make progress" on a correct program (seen under load).
    from triton_dist.sim import watchdog
    monkeypatch.setattr(watchdog, "STALL_SECONDS", 0.05)
    res = triton_dist.launch(_slow_host_collective, world_size=3, schedule=schedule, seed=1, timeout=120)
    assert res.values == [[7, 7, 7]] * 3
