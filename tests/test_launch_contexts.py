"""Kernels launched where no launch() started the rank, and from several host threads of one
rank (issue 26 item 7).

- Outside launch(), in a process where triton_dist is imported, a kernel runs as on one rank
  (as Triton's own interpreter runs it anywhere); before, it failed with "triton_dist is not
  initialized".  The host API still needs a rank.
- Launches from two host threads of one rank at once: before, under the free schedule one
  launch's end unpatched `triton.language` under the other ("Did you forget to add
  @triton.jit?"), and under pct they deadlocked falsely.  Now under free they take turns (a
  rank's device runs one kernel at a time, as one stream); under a deterministic schedule the
  second is refused at once, saying why.

Oracles: torch/numpy results, and the order the kernels ran in, seen in what they read.
"""
import threading

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist import kernel_launches
from triton_dist.sim import interp


@triton.jit
def _twice(x):
    return x * 2


@triton.jit
def reduce_kernel(x, out, N: tl.constexpr):
    pid = tl.program_id(0)
    o = tl.arange(0, N)
    v = tl.load(x + pid * N + o)
    tl.store(out + pid, _twice(tl.sum(v, axis=0)) + v.max(0) * 0 + dl.rank() * 1000 + dl.num_ranks() * 100)


def test_a_kernel_outside_launch_runs_as_on_one_rank():
    x = torch.arange(32, dtype=torch.float32)
    out = torch.zeros(4)
    reduce_kernel[(4,)](x, out, N=8)            # 4 programs, a @jit helper, tl.sum, x.max, dl.rank
    want = x.reshape(4, 8).sum(1) * 2 + 100     # rank 0 of 1
    assert torch.equal(out, want)


def test_the_host_api_outside_launch_still_says_how_to_start_ranks():
    reduce_kernel[(1,)](torch.zeros(8), torch.zeros(1), N=8)        # the lone rank exists now
    with pytest.raises(triton_dist.TritonDistError, match=r"not initialized.*triton_dist.launch"):
        triton_dist.symm_tensor((4,), torch.float32)
    with pytest.raises(triton_dist.TritonDistError, match="not initialized"):
        triton_dist.rank()


def test_a_torchrun_rank_that_skipped_init_is_told_to_init(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(triton_dist.TritonDistError, match=r"call triton_dist.init\(\) first"):
        reduce_kernel[(1,)](torch.zeros(8), torch.zeros(1), N=8)


# ---- host threads --------------------------------------------------------------------------------

@triton.jit
def copy_plus_kernel(src, dst, k, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(dst + o, _twice(tl.load(src + o)) + k + tl.sum(tl.zeros((N,), tl.float32), axis=0))


def _threads_hammering(launches):
    """Two threads, each `launches` launches of a kernel calling helpers, at the same time."""
    errors, outs = [], {}

    def worker(k):
        try:
            src = torch.arange(64, dtype=torch.float32) + k
            for i in range(launches):
                dst = torch.zeros(64)
                copy_plus_kernel[(1,)](src, dst, float(i), N=64)
                assert torch.equal(dst, src * 2 + i), (k, i)
            outs[k] = True
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors, sorted(outs)


def test_two_host_threads_launching_at_once_under_free():
    res = triton_dist.launch(_threads_hammering, 12, world_size=2)
    assert res.values == [([], [0, 1])] * 2


def test_two_host_threads_outside_launch():
    assert _threads_hammering(12) == ([], [0, 1])


@triton.jit
def first_kernel(out, N: tl.constexpr):
    tl.store(out + tl.arange(0, N), tl.arange(0, N).to(tl.float32) + 1)


@triton.jit
def second_kernel(src, dst, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(dst + o, tl.load(src + o) * 10)


def _overlapping(schedule_free):
    """Thread A launches first_kernel; while A's launch holds the rank (its observer runs),
    thread B launches second_kernel, which reads what first_kernel writes.  Under free, B waits
    its turn: it reads A's output.  Otherwise B is refused at once."""
    out, dst = torch.zeros(8), torch.zeros(8)
    seen = {}

    def run_b():
        try:
            second_kernel[(1,)](out, dst, N=8)
            seen["b"] = "ran"
        except triton_dist.TritonDistError as e:
            seen["b"] = str(e)

    def observer(launch):
        if launch.fn.__name__ != "first_kernel":
            return
        b = threading.Thread(target=run_b, name="thread-B")
        b.start()
        if schedule_free:
            for _ in range(6000):               # B is queued behind A (up to 60 s on a loaded machine)
                if interp.launches_waiting():
                    break
                b.join(0.01)
            seen["queued"] = interp.launches_waiting()
            seen["thread"] = b
        else:
            b.join(60)

    kernel_launches.subscribe(observer)
    try:
        first_kernel[(1,)](out, N=8)
    finally:
        kernel_launches.unsubscribe(observer)
    if "thread" in seen:
        seen.pop("thread").join(60)
    return out.tolist(), dst.tolist(), seen


def test_a_second_launch_waits_for_the_first_under_free():
    out, dst, seen = triton_dist.launch(_overlapping, True, world_size=1).values[0]
    assert out == [float(i + 1) for i in range(8)]
    assert seen == {"b": "ran", "queued": 1}
    assert dst == [10.0 * (i + 1) for i in range(8)]     # B ran after A: it read A's output


@pytest.mark.parametrize("schedule", ["pct", "random"])
def test_a_second_concurrent_launch_is_refused_at_once_under_a_deterministic_schedule(schedule):
    out, dst, seen = triton_dist.launch(_overlapping, False, world_size=1, schedule=schedule, seed=3).values[0]
    assert out == [float(i + 1) for i in range(8)] and dst == [0.0] * 8
    assert f"kernel second_kernel was launched from host thread 'thread-B' while kernel first_kernel" in seen["b"]
    assert f"schedule={schedule!r} replays one host task per rank" in seen["b"]
    assert "Launch from one thread (join the other first), or use schedule='free'" in seen["b"]


def test_launches_from_threads_one_after_the_other_work_under_pct():
    def body():
        results = []

        def one(k):
            x = torch.full((8,), float(k))
            out = torch.zeros(8)
            copy_plus_kernel[(1,)](x, out, 1.0, N=8)
            results.append(out.tolist())
        for k in range(3):
            t = threading.Thread(target=one, args=(k,))
            t.start()
            t.join()
        return results
    vals = triton_dist.launch(body, world_size=2, schedule="pct", seed=1).values
    assert vals == [[[2.0 * k + 1] * 8 for k in range(3)]] * 2
    assert np.all(np.asarray(vals) >= 1)
