"""Issue 32, "False alarms and hangs": each correct program passes, its buggy twin is still caught.

- TRITON_DIST_SIM_INIT_CHECK=1 poisons what the user allocates with triton_dist.symm_tensor,
  not the kernel library's workspaces (the library relies on symm_tensor's documented zero
  fill, which every backend gives: sim/initcheck.py).  Oracle: torch's sum / concatenation;
  the user's own unwritten read is still an UninitializedReadError.
- A block that hands cube<->vector flags with sub_vec_id takes one AI core (1 cube + 2
  vector cores): as many blocks as AI cores meet in sync_block_all("all"); one more cannot
  all be resident, which is a deadlock on the NPU.  Oracle: the values each block read from
  its neighbour; the device's AI core count (910B2: 24, AscendNPU-IR NPUTargetSpec.td).
- A poll loop that also counts its rounds in memory (a counter nobody reads) spins: PCT does
  not starve the producer behind it, and with nobody to set the flag it is a deadlock.
  Oracle: the producer's sum; a flag nobody sets can never be seen.
"""
import os

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist import kernels
from triton_dist.sim.initcheck import UninitializedReadError


# ---- the initcheck and the kernel library ---------------------------------------------------------

@triton.jit
def _read_first(buf, out, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out + offs, tl.load(buf + offs))


def _library_ops_under_initcheck(user_writes_first):
    os.environ["TRITON_DIST_SIM_INIT_CHECK"] = "1"
    try:
        rank, n = triton_dist.rank(), triton_dist.world_size()
        g = torch.Generator().manual_seed(rank)
        x = torch.randn(2 * n, 300, generator=g)
        got = {"one_shot": kernels.all_reduce(x), "ring": kernels.all_reduce(x, method="ring"),
               "gather": kernels.all_gather(x), "scatter": kernels.reduce_scatter(x)}
        a, b = torch.randn(8, 32, generator=g), torch.randn(32, 16, generator=torch.Generator().manual_seed(99))
        got["ag_gemm"] = kernels.ag_gemm(a, b)
        # the user's own allocation is still poisoned: reading it unwritten is reported
        buf = triton_dist.symm_tensor((64,), torch.int32)
        if user_writes_first:
            buf.copy_(torch.arange(64, dtype=torch.int32))
        triton_dist.barrier()
        out = torch.zeros(64, dtype=torch.int32)
        try:
            _read_first[(1,)](buf, out, N=64)
            user = out.tolist()
        except UninitializedReadError as e:
            user = str(e)
        kernels.free_workspaces()
        return {k: v.tolist() for k, v in got.items()}, x.tolist(), a.tolist(), user
    finally:
        os.environ.pop("TRITON_DIST_SIM_INIT_CHECK", None)


def _oracle(xs, as_, n):
    xs = [torch.tensor(x) for x in xs]
    total = sum(xs)
    m = xs[0].shape[0] // n
    b = torch.randn(32, 16, generator=torch.Generator().manual_seed(99))
    return {"one_shot": total, "ring": total, "gather": torch.cat(xs), "scatter": [total[r * m:(r + 1) * m] for r in range(n)],
            "ag_gemm": torch.cat([torch.tensor(a) for a in as_]) @ b}


@pytest.mark.parametrize("user_writes_first", [True, False])
def test_initcheck_passes_the_kernel_library_and_still_catches_the_users_unwritten_read(user_writes_first):
    n = 2
    res = triton_dist.launch(_library_ops_under_initcheck, user_writes_first, world_size=n, timeout=240).values
    want = _oracle([r[1] for r in res], [r[2] for r in res], n)
    for rank, (got, _, _, user) in enumerate(res):
        for op in ("one_shot", "ring", "gather", "ag_gemm"):
            torch.testing.assert_close(torch.tensor(got[op]), want[op], rtol=1e-5, atol=1e-4, msg=op)
        torch.testing.assert_close(torch.tensor(got["scatter"]), want["scatter"][rank], rtol=1e-5, atol=1e-4)
        if user_writes_first:
            assert user == list(range(64))
        else:
            assert isinstance(user, str) and user.startswith("uninitialised read: rank "), user
            assert "'buf' allocated at test_trust_round4_sim.py:" in user, user
            assert "(triton_dist.symm_tensor with TRITON_DIST_SIM_INIT_CHECK=1)" in user, user


# ---- a block of cube + two vector instances takes one AI core -----------------------------------

from triton.language.extra.cann import extension as al  # noqa: E402 - after triton_dist installs it


@triton.jit
def _split_meet(ws_ptr, out_ptr, NB: tl.constexpr):
    # each block's cube writes its id and hands it to both vector cores; every core of every block
    # meets; then each vector core reads the next block's id (written before that block arrived)
    pid = tl.program_id(0)
    one = tl.arange(0, 1)
    with al.scope(core_mode="cube"):
        tl.store(ws_ptr + pid + one, tl.full((1,), 1, tl.int32) + pid)
        al.sync_block_set("cube", "vector", 0)
    al.sync_block_wait("cube", "vector", 0)
    al.sync_block_all("all", 0)
    tl.store(out_ptr + pid * 2 + al.sub_vec_id() + one, tl.load(ws_ptr + (pid + 1) % NB + one))


def _meet(nb):
    ws = triton_dist.symm_tensor((nb,), torch.int32)
    out = torch.zeros(2 * nb, dtype=torch.int32)
    _split_meet[(nb,)](ws, out, NB=nb)
    return out.tolist()


@pytest.fixture
def quick_watchdog(monkeypatch):
    from triton_dist.sim import watchdog
    monkeypatch.setattr(watchdog, "STALL_SECONDS", 0.5)


@pytest.mark.parametrize("schedule,seed", [("free", None), ("pct", 3), ("random", 1)])
def test_as_many_split_blocks_as_ai_cores_meet_in_sync_block_all(schedule, seed):
    nb = 24                                          # the 910B2's AI cores (the default profile)
    res = triton_dist.launch(_meet, nb, world_size=1, schedule=schedule, seed=seed, timeout=240)
    want = [(p + 1) % nb + 1 for p in range(nb) for _ in range(2)]
    assert res.values == [want]


@pytest.mark.parametrize("schedule,seed", [("free", None), ("pct", 0)])
def test_one_split_block_more_than_ai_cores_is_a_deadlock_in_blocks(quick_watchdog, schedule, seed):
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_meet, 25, world_size=1, schedule=schedule, seed=seed, timeout=240)
    text = str(ei.value)
    assert "grid of 25 blocks on 24 AI cores (a block of this kernel takes a whole AI core: its cube core and 2 " \
           "vector cores" in text, text
    assert "blocks 0-23 wait; block 24 waits for an AI core" in text, text
    assert "launch at most 24 blocks that wait for each other" in text, text
    assert "the 75 cores of the 25 blocks of rank 0 (each block its cube core and 2 vector cores; " \
           "sync_block_all('all'))" in text, text


# ---- a poll loop that counts its rounds in memory -------------------------------------------------

LOADS = 100          # the producer's loads: more steps than PCT's change points cover (short_pct)


@pytest.fixture
def short_pct(monkeypatch):
    """PCT's change points among the first 32 steps (the ranks fork from this process): a
    producer of a few hundred loads outlives them, as a real kernel's thousands outlive 4000."""
    from triton_dist.sim.schedulers import pct
    monkeypatch.setattr(pct, "STEPS_ESTIMATE", 32)


@triton.jit
def _counted_poll(flag, data, cnt, out, LOADS: tl.constexpr, SETS_FLAG: tl.constexpr, FORM: tl.constexpr):
    if dl.rank() == 0:
        acc = 0
        for i in range(LOADS):                      # a producer that reads for a long time
            acc += tl.load(data + (i % 16))
        tl.store(data + 16, acc)
        tl.debug_barrier()                          # the sum lands before the flag
        if SETS_FLAG:
            tl.atomic_xchg(flag, 1, sem="release")
    else:
        r = dl.symm_at(flag, 0)
        while tl.atomic_add(r, 0, sem="acquire") == 0:
            if FORM == 0:
                tl.atomic_add(cnt, 1)               # its rounds, counted in memory; nobody reads them
            else:
                tl.store(cnt, tl.load(cnt) + 1)
        tl.store(out, tl.load(dl.symm_at(data, 0) + 16))


def _counting(sets_flag, form):
    flag = triton_dist.symm_tensor((16,), torch.int32)
    data = triton_dist.symm_tensor((32,), torch.int32)
    data[:16] = 1
    cnt = torch.zeros(16, dtype=torch.int32)
    out = torch.full((1,), -1, dtype=torch.int32)
    triton_dist.barrier()
    _counted_poll[(1,)](flag, data, cnt, out, LOADS=LOADS, SETS_FLAG=sets_flag, FORM=form)
    triton_dist.barrier()
    return out.item(), int(cnt[0]) > 0


@pytest.mark.parametrize("form,runs", [
    (0, (("pct", range(8)), ("explore", (1, 4)), ("free", (None,)), ("random", (0,)))),
    (1, (("pct", range(3)), ("explore", (1,)), ("free", (None,))))])
def test_a_poll_that_counts_its_rounds_in_memory_passes_pct_and_explore(short_pct, form, runs):
    for schedule, seeds in runs:
        for seed in seeds:
            res = triton_dist.launch(_counting, True, form, world_size=2, schedule=schedule, seed=seed, timeout=120)
            assert res.values[1][0] == LOADS, (form, schedule, seed, res.values)   # the producer's sum


@pytest.mark.parametrize("schedule,seed,form", [("pct", 0, 0), ("explore", 1, 1), ("free", None, 0), ("free", None, 1)])
def test_a_counting_poll_of_a_flag_nobody_sets_is_a_deadlock(short_pct, quick_watchdog, schedule, seed, form):
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_counting, False, form, world_size=2, schedule=schedule, seed=seed, timeout=90)
    text = str(ei.value)
    assert "timed out" not in text, text
    assert "rank 1 core 0: polls with atomics at test_trust_round4_sim.py:" in text, text
    assert "sees 0 every time, writing only a count of its rounds, which nothing reads" in text, text


@triton.jit
def _heartbeat(flag, cnt, N: tl.constexpr):
    # rank 0 waits until rank 1 has counted N rounds, then sets the flag rank 1's loop waits for:
    # the count IS read, so the counting loop must keep running (no deadlock)
    if dl.rank() == 0:
        while tl.atomic_add(dl.symm_at(cnt, 1), 0, sem="acquire") < N:
            pass
        tl.atomic_xchg(flag, 1, sem="release")
    else:
        while tl.atomic_add(dl.symm_at(flag, 0), 0, sem="acquire") == 0:
            tl.atomic_add(cnt, 1)


def _read_count():
    flag = triton_dist.symm_tensor((16,), torch.int32)
    cnt = triton_dist.symm_tensor((16,), torch.int32)
    triton_dist.barrier()
    _heartbeat[(1,)](flag, cnt, N=40)
    triton_dist.barrier()
    return int(cnt[0])


def test_a_count_another_task_reads_keeps_counting(short_pct):
    for schedule, seeds in (("pct", range(3)), ("explore", (4,)), ("free", (None,))):
        for seed in seeds:
            res = triton_dist.launch(_read_count, world_size=2, schedule=schedule, seed=seed, timeout=120)
            assert res.values[1] >= 40, (schedule, seed, res.values)


# ---- the same class elsewhere: a poll loop that fences (or quiets) every round ------------------

from triton_dist.language.extra import libshmem_device as shm  # noqa: E402


@triton.jit
def _fenced_poll(flag, data, out, LOADS: tl.constexpr, SETS_FLAG: tl.constexpr, QUIET: tl.constexpr):
    if dl.rank() == 0:
        acc = 0
        for i in range(LOADS):
            acc += tl.load(data + (i % 16))
        tl.store(data + 16, acc)
        tl.debug_barrier()
        if SETS_FLAG:
            tl.atomic_xchg(flag, 1, sem="release")
    else:
        r = dl.symm_at(flag, 0)
        while tl.atomic_add(r, 0, sem="acquire") == 0:
            if QUIET:
                shm.quiet()                         # nothing in flight: it completes nothing
            else:
                shm.fence()
        tl.store(out, tl.load(dl.symm_at(data, 0) + 16))


def _fenced(sets_flag, quiet):
    flag = triton_dist.symm_tensor((16,), torch.int32)
    data = triton_dist.symm_tensor((32,), torch.int32)
    data[:16] = 1
    out = torch.full((1,), -1, dtype=torch.int32)
    triton_dist.barrier()
    _fenced_poll[(1,)](flag, data, out, LOADS=LOADS, SETS_FLAG=sets_flag, QUIET=quiet)
    triton_dist.barrier()
    return out.item()


@pytest.mark.parametrize("quiet", [False, True])
def test_a_poll_that_fences_every_round_passes_pct(short_pct, quiet):
    for seed in range(4):
        res = triton_dist.launch(_fenced, True, quiet, world_size=2, schedule="pct", seed=seed, timeout=120)
        assert res.values[1] == LOADS, (seed, res.values)


@pytest.mark.parametrize("schedule,seed,quiet", [("pct", 0, False), ("free", None, True)])
def test_a_fencing_poll_of_a_flag_nobody_sets_is_a_deadlock(short_pct, quick_watchdog, schedule, seed, quiet):
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_fenced, False, quiet, world_size=2, schedule=schedule, seed=seed, timeout=90)
    text = str(ei.value)
    assert "timed out" not in text, text
    assert "rank 1 core 0: polls with atomics at test_trust_round4_sim.py:" in text, text
    assert "sees 0 every time, writing nothing" in text, text


# ---- the same class elsewhere: a mix kernel naming sub_vec_id runs a block per AI core ------------

@triton.jit
def _mix_meet(x, out):
    # tl.dot makes it a mix kernel; with sub_vec_id both vector cores of each AI core run each
    # block; every core meets, then each writes its block's dot row sum
    pid = tl.program_id(0)
    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    d = tl.dot(tl.load(x + offs), tl.load(x + offs))
    al.sync_block_all("all", 0)
    tl.store(out + pid * 2 + al.sub_vec_id() + tl.arange(0, 1), tl.sum(tl.sum(d, 1), 0)[None])


def _mix(nb):
    x = torch.eye(16)
    out = torch.zeros(2 * nb)
    _mix_meet[(nb,)](x, out)
    return out.tolist()


def test_mix_blocks_with_two_vector_cores_fit_the_ai_cores_and_one_more_is_a_deadlock_in_blocks(quick_watchdog):
    assert triton_dist.launch(_mix, 24, world_size=1, timeout=240).values == [[16.0] * 48]   # eye @ eye sums to 16
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_mix, 25, world_size=1, timeout=240)
    text = str(ei.value)
    assert "grid of 25 blocks on 24 AI cores (a block of this kernel takes a whole AI core: its 2 vector cores, as " \
           "it runs tl.dot and names sub_vec_id): blocks 0-23 wait; block 24 waits for an AI core" in text, text
