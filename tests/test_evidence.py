"""What the device model saw, in the failure (issue 24 item 1; sim/evidence/).

Each case is an NPU-only failure of the "Why" list with its correct twin.  The oracle is the
device model's rules as docs/device_model.md states them from the Ascend sources: a
tl.store is a DMA in flight until a fence (evidence D), a signal SET writes back its whole
64-byte line (docs/semantics.md §3), a scalar tl.load goes through the non-coherent data
cache; each failure must name the kernel lines, the symmetric tensor and element, and the
fix, with the word users search for (`fence`, `consume_token`, `cache line`, `never`).
Before sim/evidence/ every one of them said only "awaits 1, sees 0" or the user's own
assertion.
"""
import re

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm

N = 16
SEEDS = range(24)


def _line(fn, text):
    """The source line number of the first line of kernel `fn` containing `text`."""
    import inspect
    lines, start = inspect.getsourcelines(fn.fn)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


# ---- fence: a signal overtook a store still in flight (the seed documents' producer/consumer) -------

@triton.jit
def producer_consumer(data, sig, src, out, N: tl.constexpr, FENCE: tl.constexpr, CONSUME: tl.constexpr):
    offs = tl.arange(0, N)
    if dl.rank() == 0:
        tl.store(dl.symm_at(data, 1) + offs, tl.load(src + offs))      # the tile into the peer's buffer
        if FENCE:
            shm.fence()
        dl.notify(sig, 1, signal=1, sig_op="set")                       # the tile is ready
    else:
        token = dl.wait(sig, 1, "sys", "acquire", waitValue=1)
        d = data
        if CONSUME:
            d = dl.consume_token(data, token)
        tl.store(out + offs, tl.load(d + offs))


def _producer_consumer(fence, consume):
    data = triton_dist.symm_tensor((N,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    src = torch.arange(N, dtype=torch.float32) + 1
    out = torch.zeros(N)
    triton_dist.barrier()
    producer_consumer[(1,)](data, sig, src, out, N=N, FENCE=fence, CONSUME=consume)
    if triton_dist.rank() == 1:
        assert torch.equal(out, src), f"rank 1 read {out.tolist()}"


def _first_failure(fence, consume, schedule="pct"):
    for s in SEEDS:
        try:
            triton_dist.launch(_producer_consumer, fence, consume, world_size=2, schedule=schedule, seed=s,
                               timeout=30)
        except triton_dist.RankError as e:
            return s, e
    return None, None


def test_a_signal_that_overtook_the_store_is_named_with_the_fence():
    seed, e = _first_failure(fence=False, consume=True)
    assert e is not None, f"no seed of {len(SEEDS)} let the signal overtake the store"
    text = str(e)
    assert "rank 1 read [0.0" in text                         # the user's own assertion, still there
    assert "what the device model saw" in text
    (first, *_) = e.evidence
    assert first.startswith("[fence] rank 1 core 0 loaded symm tensor #0 (float32[16]) of rank 1, elements [0:16]")
    assert "('data' allocated at test_evidence.py:" in first
    # the load, the store it read too early, the signal that overtook the store, the wait that saw it
    at = [first.find(f"at test_evidence.py:{_line(producer_consumer, where)} (producer_consumer)")
          for where in ("tl.load(d + offs)", "tl.store(dl.symm_at", "dl.notify(sig", "dl.wait(sig")]
    assert -1 not in at and at == sorted(at), (at, first)
    assert "libshmem_device.fence()" in first and "consume_token" not in first


def test_the_fenced_producer_consumer_passes_every_seed_with_nothing_seen():
    seed, e = _first_failure(fence=True, consume=True)
    assert e is None, str(e)


def test_an_unfenced_load_without_consume_token_names_both_fixes():
    seed, e = _first_failure(fence=False, consume=False)
    assert e is not None
    first = e.evidence[0]
    assert first.startswith("[fence]") and "fence()" in first
    assert "dl.consume_token(ptr, token)" in first


def test_the_free_schedule_failure_carries_the_same_words():
    # free runs are not reproducible: whenever one of them fails, it says why (about 1 in 3
    # fails on an idle machine; none may fail on a loaded one)
    for _ in range(12):
        try:
            triton_dist.launch(_producer_consumer, False, True, world_size=2, timeout=30)
        except triton_dist.RankError as e:
            assert e.evidence and e.evidence[0].startswith("[fence]"), str(e)
            return
    pytest.skip("none of 12 free runs let the signal overtake the store (a loaded machine)")


# ---- cache line: SETs of two cores into one 64-byte line ---------------------------------------------

@triton.jit
def packed_slots(sig, GAP: tl.constexpr):
    me = dl.rank()
    if me < 2:
        dl.notify(sig + me * GAP, 2, signal=1, sig_op="set")           # slots GAP elements apart on rank 2
    else:
        shm.signal_wait_until(sig, shm.ACLSHMEM_CMP_EQ, 1)
        shm.signal_wait_until(sig + GAP, shm.ACLSHMEM_CMP_EQ, 1)


def _packed(gap):
    sig = triton_dist.symm_tensor((64,), torch.int32)
    triton_dist.barrier()
    packed_slots[(1,)](sig, GAP=gap)
    triton_dist.barrier()
    return [int(sig[0]), int(sig[gap])]


def test_a_set_lost_in_one_cache_line_says_cache_line_and_the_padding():
    for s in SEEDS:
        try:
            triton_dist.launch(_packed, 1, world_size=3, schedule="random", seed=s, timeout=30)
        except triton_dist.DeadlockError as err:
            text, first = str(err), err.evidence[0]
            break
    else:
        pytest.fail("no seed lost an update")
    assert "awaits 1, sees 0" in text                          # the report as before ...
    assert first.startswith("[cache line] rank ")                # ... and why
    m = re.search(r"wrote 0 over 1 at symm tensor #0 \(int32\[64\]\) of rank 2, element (\d)", first)
    assert m, first
    # the lost element is the one the stuck wait awaits
    assert f"element {m.group(1)} ('sig' allocated at test_evidence.py:" in text.split("sees 0")[0].splitlines()[-1]
    assert f"at test_evidence.py:{_line(packed_slots, 'dl.notify')} (packed_slots)" in first
    assert "64-byte cache line" in first and "SIGNAL_SLOT_STRIDE" in first


def test_slots_a_cache_line_apart_lose_nothing():
    for s in SEEDS:
        res = triton_dist.launch(_packed, 16, world_size=3, schedule="random", seed=s, timeout=30)
        assert res.values[2] == [1, 1]           # rank 2 holds both SETs


# ---- never: a wait on a slot nothing signals ----------------------------------------------------------

@triton.jit
def wrong_slot(sig, WAIT_SLOT: tl.constexpr):
    if dl.rank() == 0:
        dl.notify(sig, 1, signal=1, sig_op="set")                            # slot 0 of rank 1
        dl.notify(sig + 2 * shm.SIGNAL_SLOT_STRIDE_INT32, 1, signal=1, sig_op="set")   # slot 2
    else:
        dl.wait(sig + WAIT_SLOT * shm.SIGNAL_SLOT_STRIDE_INT32, 1, "sys", "acquire", waitValue=1)


def _wrong_slot(slot):
    sig = triton_dist.symm_tensor((64,), torch.int32)
    triton_dist.barrier()
    wrong_slot[(1,)](sig, WAIT_SLOT=slot)
    stride = getattr(shm.SIGNAL_SLOT_STRIDE_INT32, "value", shm.SIGNAL_SLOT_STRIDE_INT32)   # a tl.constexpr
    return int(sig[slot * stride])


@pytest.mark.parametrize("schedule,seed", [("free", None), ("pct", 2)])
def test_a_wait_on_a_slot_nothing_signals_says_never_and_names_the_nearest(schedule, seed):
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_wrong_slot, 1, world_size=2, timeout=30, schedule=schedule, seed=seed)
    first = ei.value.evidence[0]
    assert first.startswith(f"[never signalled] rank 1 core 0's wait at test_evidence.py:"
                            f"{_line(wrong_slot, 'dl.wait')} (wrong_slot) awaits 1 at symm tensor #0 (int32[64]) "
                            f"of rank 1, element 16 ('sig' allocated at test_evidence.py:"), first
    assert "never signalled during this launch" in first
    notify = _line(wrong_slot, "dl.notify(sig, 1")
    # the slots signalled nearest to element 16: element 0 and element 32 (16 elements either side)
    assert f"element 0 (SET to 1 by rank 0 core 0 at test_evidence.py:{notify} (wrong_slot))" in first
    assert f"element 32 (SET to 1 by rank 0 core 0 at test_evidence.py:{notify + 1} (wrong_slot))" in first


def test_a_wait_on_the_signalled_slot_passes():
    assert triton_dist.launch(_wrong_slot, 2, world_size=2, timeout=30).values[1] == 1


# ---- stale cache line: a spin on plain scalar loads ------------------------------------------------------

@triton.jit
def spin_on_plain_loads(flag, go):
    if dl.rank() == 1:
        x = tl.load(flag)                      # caches the flag's line (0)
        dl.notify(go, 0, signal=1, sig_op="set")
        while tl.load(flag) != 1:              # hits the stale line for ever
            pass
    else:
        dl.wait(go, 1, "sys", "acquire", waitValue=1)
        dl.notify(flag, 1, signal=1, sig_op="set")


def _spin():
    flag = triton_dist.symm_tensor((16,), torch.int32)
    go = triton_dist.symm_tensor((16,), torch.int32)
    spin_on_plain_loads[(1,)](flag, go)


def test_a_spin_on_a_stale_cached_line_says_so():
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_spin, world_size=2, timeout=30, schedule="pct", seed=1)
    first = ei.value.evidence[0]
    assert first.startswith("[stale cache line] rank 1 core 0 reads symm tensor #0 (int32[16]) of rank 1, "
                            "element 0 ('flag' allocated at test_evidence.py:"), first
    assert f"at test_evidence.py:{_line(spin_on_plain_loads, 'while tl.load')} (spin_on_plain_loads)" in first
    assert "line holds 0, while memory holds 1" in first and "dl.wait" in first


# ---- the ranking: the finding at the stuck address comes first -------------------------------------------

def test_findings_at_the_stuck_address_and_of_the_failing_rank_come_first():
    from triton_dist.sim.evidence import explain
    found = [(1, "fence", 0, 0, 100, "old, other rank"), (2, "stale", 1, 0, 200, "newest, failing rank"),
             (3, "cache line", 0, 0, 300, "at the stuck address"), (4, "fence", 0, 0, 400, "newest")]
    out = explain.ranked(found, stuck={300}, failing_rank=1)
    assert [w.split("] ")[1] for w in out] == ["at the stuck address", "newest, failing rank", "newest",
                                              "old, other rank"]


# ---- a failed launch is race-checked too (issue 24 item 2) ------------------------------------------------

def test_a_failed_launch_is_race_checked_and_the_report_names_the_fence():
    seed, e = _first_failure(fence=False, consume=True)
    assert e is not None
    with pytest.raises(triton_dist.RankError) as ei:      # the same seed, with the check on: the same failure
        triton_dist.launch(_producer_consumer, False, True, world_size=2, schedule="pct", seed=seed, timeout=30,
                           race_check=True)
    text = str(ei.value)
    assert "rank 1 read [0.0" in text and "[fence]" in text
    assert "the race check of this failed launch" in text, text
    (race,) = ei.value.races
    assert {race.first.op, race.second.op} == {"stores to", "loads"} and "fence()" in race.missing


def test_a_deadlocked_launch_is_race_checked_or_says_why_not():
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_wrong_slot, 1, world_size=2, timeout=30, race_check=True)
    text = str(ei.value)
    assert ("the race check of this failed launch (what the ranks recorded until it stopped): no races" in text
            or "the race check did not analyse this failed launch: rank" in text), text


# ---- no false alarms: correct kernels leave no evidence, under several schedules -----------------------

def _then_fail(body, *args):
    """Run a correct body, then fail on purpose: the failure shows what the watch recorded."""
    body(*args)
    triton_dist.barrier()
    raise RuntimeError("failing on purpose after a correct kernel")


CORRECT = {"fenced producer/consumer": (_producer_consumer, (True, True), 2),
           "slots a cache line apart": (_packed, (16,), 3),
           "a wait on the signalled slot": (_wrong_slot, (2,), 2)}


@pytest.mark.parametrize("name", sorted(CORRECT))
@pytest.mark.parametrize("schedule,seed", [("free", None), ("random", 0), ("random", 1), ("pct", 0), ("pct", 1)])
def test_correct_kernels_leave_no_evidence(name, schedule, seed):
    body, args, ranks = CORRECT[name]
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_then_fail, body, *args, world_size=ranks, schedule=schedule, seed=seed, timeout=60)
    assert "failing on purpose" in str(ei.value)
    assert ei.value.evidence == [], ei.value.evidence
    assert "what the device model saw" not in str(ei.value)
