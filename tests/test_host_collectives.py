"""torch.distributed collectives in rank host code (issue 14 item 10).

Upstream tutorials build their references with dist.all_reduce / all_gather / broadcast /
barrier on the gloo group between kernel launches.  Under random/pct such a call is a
blocking point like triton_dist.barrier(): the program runs, gives the values torch's
definitions say, and the same seed replays the same schedule.
"""
import pytest
import torch
import torch.distributed as dist
import triton
import triton.language as tl

import triton_dist

N = 8


@triton.jit
def add_one_kernel(x, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x + offs, tl.load(x + offs) + 1)


def _program():
    r, n = triton_dist.rank(), triton_dist.world_size()
    x = triton_dist.symm_tensor((N,), torch.float32)
    x.fill_(r)
    add_one_kernel[(1,)](x, N=N)                 # x = r + 1
    total = x.clone()
    dist.all_reduce(total)                       # sum over ranks of (r + 1)
    parts = [torch.empty(N) for _ in range(n)]
    dist.all_gather(parts, x.clone())            # [1, 2, ..., n]
    b = torch.full((4,), float(r))
    dist.broadcast(b, src=n - 1)                 # n - 1 everywhere
    dist.barrier()
    add_one_kernel[(1,)](x, N=N)                 # x = r + 2
    objs = [None] * n
    dist.all_gather_object(objs, ("rank", r))
    work = dist.all_reduce(torch.ones(2), async_op=True)
    work.wait()
    return [total[0].item(), [p[0].item() for p in parts], b[0].item(), x[0].item(), objs]


def _expected(n):
    return [[n * (n + 1) / 2, [float(k + 1) for k in range(n)], float(n - 1), float(r + 2),
             [("rank", k) for k in range(n)]] for r in range(n)]


@pytest.mark.parametrize("schedule", ["free", "random", "pct"])
def test_torch_collectives_in_rank_code_run_under_every_schedule(schedule):
    seeds = [None] if schedule == "free" else [1, 2, 3]
    for seed in seeds:
        res = triton_dist.launch(_program, world_size=3, schedule=schedule, seed=seed, timeout=120)
        assert res.values == _expected(3), (schedule, seed)


@pytest.mark.parametrize("schedule", ["random", "pct"])
def test_torch_collectives_replay_exactly(schedule):
    a = triton_dist.launch(_program, world_size=2, schedule=schedule, seed=7, timeout=120)
    b = triton_dist.launch(_program, world_size=2, schedule=schedule, seed=7, timeout=120)
    assert a.values == b.values == _expected(2)
    assert a.schedule_digest == b.schedule_digest and a.steps == b.steps > 0


def test_collective_on_a_subgroup_under_a_deterministic_schedule_says_what_to_do():
    def body():
        g = dist.new_group([0, 1])
        if triton_dist.rank() < 2:
            dist.all_reduce(torch.ones(1), group=g)
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=3, schedule="pct", seed=1, timeout=120)
    assert "subgroup" in str(ei.value) and "schedule='free'" in str(ei.value)
