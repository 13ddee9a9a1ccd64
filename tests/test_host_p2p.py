"""torch.distributed point-to-point calls in rank host code (issue 26 item 7).

send/recv/isend/irecv + wait are scheduling points (they ran into the launch timeout under
random/pct: the receiver blocked in gloo holding the baton) and race-detector edges (the
free schedule reported a false race between what the sender's kernel wrote and what the
receiver's kernel reads after the message).

Oracles: the values torch's definitions give (the receiver gets the sender's tensor);
a program whose only order is the message is race-free by the edge table of
docs/races.md, and its twin without the message has a race; two ranks that both receive
first can never finish (gloo's send and receive wait for each other: sim/host_p2p.py).
"""
import pytest
import torch
import torch.distributed as dist
import triton
import triton.language as tl

import triton_dist
from triton_dist.language.extra import libshmem_device as shm

SCHEDULES = [("free", None), ("random", 0), ("random", 1), ("pct", 0), ("pct", 1), ("pct", 2)]


def _ring():
    """Each rank sends to the next (blocking, then isend/irecv + wait, then batch_isend_irecv)."""
    r, n = triton_dist.rank(), triton_dist.world_size()
    nxt, prv = (r + 1) % n, (r - 1) % n
    got = torch.zeros(4)
    if r % 2 == 0:
        dist.send(torch.full((4,), float(r)), nxt)
        src = dist.recv(got, prv)
    else:
        src = dist.recv(got, prv)
        dist.send(torch.full((4,), float(r)), nxt)
    first = got[0].item()
    got2 = torch.zeros(3)
    reqs = [dist.isend(torch.full((3,), 10.0 + r), nxt, tag=3), dist.irecv(got2, prv, tag=3)]
    for q in reqs:
        q.wait()
    got3 = torch.zeros(2)
    ops = [dist.P2POp(dist.isend, torch.full((2,), 20.0 + r), nxt),
           dist.P2POp(dist.irecv, got3, prv)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    return [src, first, got2[0].item(), got3[0].item()]


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_send_recv_in_rank_code_run_under_every_schedule(schedule, seed):
    res = triton_dist.launch(_ring, world_size=3, schedule=schedule, seed=seed, timeout=30)
    assert res.values == [[(r - 1) % 3, float((r - 1) % 3), 10.0 + (r - 1) % 3, 20.0 + (r - 1) % 3]
                          for r in range(3)]


def test_send_recv_replay_exactly():
    a = triton_dist.launch(_ring, world_size=3, schedule="pct", seed=5, timeout=30)
    b = triton_dist.launch(_ring, world_size=3, schedule="pct", seed=5, timeout=30)
    assert a.schedule_digest == b.schedule_digest and a.steps == b.steps


# ---- race edges -------------------------------------------------------------------------------

@triton.jit
def put_to_next(buf, N: tl.constexpr):
    offs = tl.arange(0, N)
    r = shm.my_pe()
    tl.store(buf + offs, tl.full((N,), 1.0, tl.float32) * (r + 1))        # local data
    shm.fence()
    shm.putmem(buf + N, buf, N * 4, (r + 1) % shm.n_pes())               # into the next rank's 2nd half
    shm.quiet()


@triton.jit
def read_second_half(buf, out, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out + offs, tl.load(buf + N + offs))


def _ordered_by_message(use_message):
    r, n = triton_dist.rank(), triton_dist.world_size()
    buf = triton_dist.symm_tensor((32,), torch.float32)
    out = torch.zeros(16)
    if r == 0:
        put_to_next[(1,)](buf, N=16)                 # writes rank 1's buf[16:32]
        if use_message:
            dist.send(torch.ones(1), 1)              # after the kernel ended
    elif r == 1:
        if use_message:
            dist.recv(torch.zeros(1), 0)
            read_second_half[(1,)](buf, out, N=16)    # after the message: ordered
            return out[0].item()
        read_second_half[(1,)](buf, out, N=16)        # no order with rank 0's put
    return None


@pytest.mark.parametrize("schedule,seed", [("free", None), ("pct", 0), ("random", 1)])
def test_a_message_orders_the_kernels_around_it(schedule, seed):
    res = triton_dist.launch(_ordered_by_message, True, world_size=2, schedule=schedule, seed=seed,
                             timeout=30, race_check="report")
    assert res.races == [], res.race_report
    assert res.values[1] == 1.0                     # rank 0's data (rank 0 + 1)


@pytest.mark.parametrize("schedule,seed", [("free", None), ("pct", 0)])
def test_without_the_message_the_race_is_reported(schedule, seed):
    res = triton_dist.launch(_ordered_by_message, False, world_size=2, schedule=schedule, seed=seed,
                             timeout=30, race_check="report")
    assert len(res.races) >= 1, res.race_report
    assert "putmem" in res.race_report and "read_second_half" in res.race_report, res.race_report


# ---- nothing hangs ----------------------------------------------------------------------------

def _both_receive_first():
    r = triton_dist.rank()
    t = torch.zeros(2)
    dist.recv(t, 1 - r)                              # each waits for the other's send
    dist.send(t, 1 - r)


@pytest.mark.parametrize("schedule,seed", [("random", 0), ("pct", 0), ("pct", 1)])
def test_two_ranks_receiving_first_is_a_deadlock(schedule, seed):
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_both_receive_first, world_size=2, schedule=schedule, seed=seed, timeout=60)
    text = str(ei.value)
    assert "timed out" not in text, text
    assert "blocked in torch.distributed.recv from rank 1 at test_host_p2p.py:" in text, text


def _sender_without_receiver():
    if triton_dist.rank() == 0:
        dist.send(torch.ones(2), 1)                  # rank 1 never receives


@pytest.mark.parametrize("schedule,seed", [("random", 0), ("pct", 0)])
def test_send_whose_receiver_returned_says_so(schedule, seed):
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_sender_without_receiver, world_size=2, schedule=schedule, seed=seed, timeout=60)
    msg = ei.value.message
    assert "torch.distributed.send at test_host_p2p.py:" in msg, msg
    assert "rank 1 returned from its host code without the matching receive" in msg, msg


def test_receive_from_any_rank_is_refused_under_a_schedule():
    def body():
        if triton_dist.rank() == 0:
            dist.recv(torch.zeros(1))
        else:
            dist.send(torch.zeros(1), 0)
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=2, schedule="pct", seed=0, timeout=60)
    assert "pass src=" in ei.value.message, ei.value.message


def _by_keyword():
    r = triton_dist.rank()
    t = torch.full((2,), float(r + 5))
    if r == 0:
        dist.send(t, dst=1)
        return None
    dist.recv(t, src=0)
    return t.tolist()


@pytest.mark.parametrize("schedule,seed", [("free", None), ("pct", 0)])
def test_peer_given_by_keyword(schedule, seed):
    """torch's own spelling, send(t, dst=1) / recv(t, src=0), is the same call (it was taken
    for a receive from any rank)."""
    res = triton_dist.launch(_by_keyword, world_size=2, schedule=schedule, seed=seed, timeout=60)
    assert res.values[1] == [5.0, 5.0]              # rank 0's tensor
