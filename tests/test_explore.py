"""Issue 26 item 4: schedule="explore" (a portfolio, sim/schedulers/explore.py) and its
member "aware" (signal-, DMA- and cache-line-aware choice points, aware.py).

Two-sided, on small kernels of three bug classes of the kernel library's mutation
benchmark (benchmarks/mutants/: packed signal slots, a missing fence, a single phase):
each correct kernel passes under one whole round of the portfolio, and its buggy twin is
caught within that round.  Oracles: the correct kernels are correct on any machine (data
fenced before its signal, one 64-byte slot per signal, a peer never two rounds ahead);
the twins are wrong by the device model (docs/device_model.md: a signal SET writes back
its whole cache line; a kernel's store is a DMA that a signal may overtake) or by plain
interleaving (a peer one round ahead overwrites what is still to be read).  A schedule is
a seed: the same seed replays the same member and the same decisions.
"""
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm
from triton_dist.sim.schedulers import explore

ROUND = len(explore.MEMBERS)      # seeds 0..ROUND-1 try every member once
FAILURES = (triton_dist.DeadlockError, triton_dist.RankError)


def _caught(body, *args, world_size, check):
    """The first seed of one round of explore that fails the run or its check, or None."""
    for seed in range(ROUND):
        try:
            res = triton_dist.launch(body, *args, world_size=world_size, schedule="explore", seed=seed, timeout=60)
        except FAILURES:
            return seed
        if not check(res.values):
            return seed
    return None


# ---- two SETs into one cache line ---------------------------------------------------------------

@triton.jit
def two_setters(sig, STRIDE: tl.constexpr):
    """Ranks 1 and 2 SET their own slot on rank 0, which waits for both.  STRIDE 16 int32 =
    64 bytes: a line per slot.  STRIDE 1: both slots in one line."""
    me = dl.rank()
    if me == 0:
        dl.wait(sig, 1, "gpu", "acquire", 1)
        dl.wait(sig + STRIDE, 1, "gpu", "acquire", 1)
    else:
        dl.notify(sig + (me - 1) * STRIDE, 0, signal=1, sig_op="set")


def _setters(stride):
    sig = triton_dist.symm_tensor((64,), torch.int32)
    triton_dist.barrier()
    two_setters[(1,)](sig, STRIDE=stride)
    triton_dist.barrier()


# ---- data, then its signal ----------------------------------------------------------------------

@triton.jit
def push_then_signal(buf, sig, out, FENCE: tl.constexpr):
    offs = tl.arange(0, 64)
    if dl.rank() == 1:
        tl.store(dl.symm_at(buf, 0) + offs, offs + 7)          # a DMA into rank 0's buffer
        if FENCE:
            shm.fence()
        dl.notify(sig, 0, signal=1, sig_op="set")
    else:
        tok = dl.wait(sig, 1, "gpu", "acquire", 1)
        tl.store(out + offs, tl.load(dl.consume_token(buf, tok) + offs))


def _push(fence):
    buf = triton_dist.symm_tensor((64,), torch.int32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    triton_dist.barrier()
    push_then_signal[(1,)](buf, sig, out, FENCE=fence)
    return out.tolist()


# ---- a peer a round ahead ------------------------------------------------------------------------

@triton.jit
def exchange(buf, sig, out, rnd, PHASES: tl.constexpr):
    """Each round each rank writes (10 * round + rank) into its peer's buffer of phase
    round % PHASES, signals round + 1 there, waits for the peer's, reads."""
    me = dl.rank()
    peer = 1 - me
    p = rnd % PHASES
    offs = tl.arange(0, 16)
    tl.store(dl.symm_at(buf, peer) + p * 16 + offs, tl.full((16,), 0, tl.int32) + rnd * 10 + me)
    shm.fence()
    dl.notify(sig + p * 16, peer, signal=rnd + 1, sig_op="set")
    tok = dl.wait(sig + p * 16, 1, "gpu", "acquire", rnd + 1)
    tl.store(out + rnd, tl.load(dl.consume_token(buf, tok) + p * 16))


def _rounds(phases, n=3):
    buf = triton_dist.symm_tensor((32,), torch.int32)
    sig = triton_dist.symm_tensor((32,), torch.int32)
    out = torch.full((n,), -1, dtype=torch.int32)
    triton_dist.barrier()
    for rnd in range(n):
        exchange[(1,)](buf, sig, out, rnd, PHASES=phases)
    return out.tolist()


CLASSES = {
    # name: (body, correct arg, buggy arg, world size, check of the values)
    "packed_slots": (_setters, 16, 1, 3, lambda v: True),
    "missing_fence": (_push, True, False, 2, lambda v: v[0] == [k + 7 for k in range(64)]),
    "one_phase": (_rounds, 2, 1, 2, lambda v: v == [[10 * r + 1 for r in range(3)], [10 * r for r in range(3)]]),
}


@pytest.mark.parametrize("bug", sorted(CLASSES))
def test_correct_kernel_passes_a_round_of_explore(bug):
    body, good, _, world, check = CLASSES[bug]
    assert _caught(body, good, world_size=world, check=check) is None


@pytest.mark.parametrize("bug", sorted(CLASSES))
def test_buggy_twin_is_caught_within_a_round_of_explore(bug):
    body, _, bad, world, check = CLASSES[bug]
    assert _caught(body, bad, world_size=world, check=check) is not None


def test_a_seed_of_explore_replays_exactly_and_names_its_member():
    a = triton_dist.launch(_rounds, 2, world_size=2, schedule="explore", seed=6, timeout=60)
    b = triton_dist.launch(_rounds, 2, world_size=2, schedule="explore", seed=6, timeout=60)
    assert a.schedule_digest == b.schedule_digest and a.steps == b.steps
    digests = {triton_dist.launch(_rounds, 2, world_size=2, schedule="explore", seed=s).schedule_digest
               for s in range(ROUND)}
    assert len(digests) == ROUND                   # every member decides differently
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_wait_forever, world_size=1, schedule="explore", seed=3, timeout=60)
    assert f"seed 3 under schedule='explore' (member {explore.describe(3)})" in str(ei.value), str(ei.value)


@triton.jit
def never_signalled(sig):
    dl.wait(sig, 1, "gpu", "acquire", 1)


def _wait_forever():
    sig = triton_dist.symm_tensor((16,), torch.int32)
    never_signalled[(1,)](sig)
