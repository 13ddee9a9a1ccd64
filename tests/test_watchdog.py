"""The free schedule's watchdog calls a deadlock only when no task can make progress.

Oracle: what each task can still do, set up by hand.  A wait whose slot already holds the
awaited value is over (its task only has to run); a task that has not looked since the last
write may see it; a core whose program ended is finishing its kernel, not stuck.  Each of
these must give no verdict however long it lasts (a loaded machine gives a rank no CPU for
seconds), and its twin where the condition really never holds must be reported, naming the
wait, the value awaited and the value seen.
"""
import mmap
import os
import signal
import subprocess
import time

import pytest
import torch
import triton

import triton_dist
import triton_dist.language as dl
from triton_dist.errors import DeadlockError
from triton_dist.sim import board as B
from triton_dist.sim import watchdog as W
from triton_dist.sim.heap import address_of


@pytest.fixture
def no_stall(monkeypatch):
    monkeypatch.setattr(W, "STALL_SECONDS", 0.0)


def _verdict(board, heaps=(), judge=True):
    """Run the watchdog as the launcher does (check() every round) long enough for any verdict."""
    wd = W.BoardWatchdog(board, 60.0, heaps, judge=judge)
    for _ in range(5):
        wd.check([None] * board.world_size)
        time.sleep(0.002)
    return wd.stuck([None] * board.world_size)     # its judgement, when it raised no verdict


def _waiting(board, heap, awaited=1, seen=0, cond=B.COND_EQ, looked=True):
    """Rank 0 in a kernel, core 0 waiting on the slot at heap offset 64."""
    board.set_state(0, -1, B.IN_KERNEL)
    board.set(0, 0, B.WAITING, "wait", "k.py:3 (k)", "symm tensor #0 of rank 0 + 0", address_of(heap) + 64,
              awaited, seen, cond, 4)
    board.polled(0, 0, board.write_count() if looked else board.write_count() - 1)


def _heap(value):
    m = mmap.mmap(-1, 4096, flags=mmap.MAP_SHARED)
    m[64:68] = int(value).to_bytes(4, "little", signed=True)
    return m


def test_a_wait_whose_slot_already_holds_the_value_is_not_stuck(no_stall):
    board, heap = B.Board(1, cores=2), _heap(1)        # the signal arrived; the waiter has not run since
    _waiting(board, heap)
    assert not _verdict(board, [heap])


def test_a_wait_whose_slot_does_not_hold_it_is_a_deadlock(no_stall):
    board, heap = B.Board(1, cores=2), _heap(0)
    _waiting(board, heap)
    with pytest.raises(DeadlockError) as ei:
        _verdict(board, [heap])
    assert "rank 0 core 0: wait at k.py:3 (k)" in str(ei.value) and "awaits 1, sees 0" in str(ei.value)


@pytest.mark.parametrize("cond,awaited,value,over", [
    (B.COND_GE, 3, 4, True), (B.COND_GE, 3, 2, False), (B.COND_EQ_OR_NEXT, 5, 6, True),
    (B.COND_EQ_OR_NEXT, 5, 7, False), (B.COND_NE, 0, 0, False), (B.COND_NE, 0, 9, True),
    (B.COND_CHANGES, 0, 8, True), (B.COND_CHANGES, 0, 0, False)])
def test_each_kind_of_wait_is_re_read(no_stall, cond, awaited, value, over):
    board, heap = B.Board(1, cores=2), _heap(value)
    _waiting(board, heap, awaited=awaited, seen=0, cond=cond)
    if over:
        assert not _verdict(board, [heap])
    else:
        with pytest.raises(DeadlockError):
            _verdict(board, [heap])


def test_a_waiter_that_has_not_looked_since_the_last_write_is_not_stuck(no_stall):
    board, heap = B.Board(1, cores=2), _heap(0)
    _waiting(board, heap, looked=False)
    board.wrote()                                     # someone wrote after the waiter's last look
    assert not _verdict(board, [heap])


def test_a_core_whose_program_ended_is_not_stuck(no_stall):
    # the kernel is ending: core 0 done, core 1 idle, the host not yet out of the kernel
    board = B.Board(1, cores=2)
    board.set_state(0, -1, B.IN_KERNEL)
    board.set_state(0, 0, B.DONE)
    assert not _verdict(board)
    board.set_state(0, 0, B.IDLE)                     # the kernel is starting: no core running yet
    assert not _verdict(board)


def test_deterministic_schedules_leave_verdicts_to_the_scheduler(no_stall):
    board, heap = B.Board(1, cores=2), _heap(0)
    _waiting(board, heap)
    assert _verdict(board, [heap], judge=False)      # stuck as the board goes, yet no verdict was raised


# ---- end to end: a waiting rank that gets no CPU after its signal arrived ------------------------

@triton.jit
def wait_for_one(sig):
    dl.wait(sig, 1, "sys", "acquire", waitValue=1)


@triton.jit
def send_one(sig):
    dl.notify(sig, 1, signal=1, sig_op="set")


def _frozen_waiter(send):
    """Rank 1 waits for rank 0's signal.  Rank 0 stops rank 1 (SIGSTOP: no CPU at all) once it
    waits, sends the signal (or not), has rank 1 continued after a while, and returns."""
    import torch.distributed as dist
    from triton_dist.sim import context
    pids = [None] * 2
    dist.all_gather_object(pids, os.getpid())
    sig = triton_dist.symm_tensor((16,), torch.int32)
    triton_dist.barrier()
    if triton_dist.rank() == 1:
        wait_for_one[(1,)](sig)
        return int(sig[0])
    board = context.runtime().board
    deadline = time.monotonic() + 60
    while int(board.rec[1, 0]["state"]) != B.WAITING:
        if time.monotonic() > deadline:
            raise AssertionError("rank 1 never waited")
        time.sleep(0.01)
    os.kill(pids[1], signal.SIGSTOP)
    if send:
        send_one[(1,)](sig)
    # rank 1 gets the CPU back only after the watchdog's window has passed many times over
    subprocess.Popen(["sh", "-c", f"sleep {20 * W.STALL_SECONDS}; kill -CONT {pids[1]}"])
    return None


def test_a_rank_frozen_after_its_signal_arrived_is_not_a_deadlock(monkeypatch):
    monkeypatch.setattr(W, "STALL_SECONDS", 0.2)
    res = triton_dist.launch(_frozen_waiter, True, world_size=2, timeout=60)
    assert res.values == [None, 1]


def test_a_signal_that_never_comes_is_a_deadlock(monkeypatch):
    monkeypatch.setattr(W, "STALL_SECONDS", 0.2)
    with pytest.raises(DeadlockError) as ei:
        triton_dist.launch(_frozen_waiter, False, world_size=2, timeout=60)
    text = str(ei.value)
    assert "no rank can make progress" in text, text
    assert "rank 1 core 0: wait at test_watchdog.py:" in text and "awaits 1, sees 0" in text, text
