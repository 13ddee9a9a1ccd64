"""Scenario of upstream test_barrier_ops: every PE (or every member of a team) reads its own
int64 counter, passes a barrier, then (vector sub-core 0) stores counter + 1 into the next
member's counter, and passes the barrier again: each counter must end at exactly 1 (the
first barrier orders every read before the neighbour's write).  Four kernels: barrier_all,
barrier_all_vec, barrier(team), barrier_vec(team); with 4 or more ranks, the team is the odd
ranks, made by shmem.team_split_strided(WORLD, 1, 2, world // 2) (non-members: counter 0)."""
import torch
import torch.distributed as dist
import triton
import triton.language as tl
from triton.language.extra.cann.extension import sub_vec_id

import shmem as ash
from triton_dist.language.extra import libshmem_device as shm

import common


@triton.jit
def ring_world(counter, rank, world, VEC: tl.constexpr):
    val = tl.load(counter)
    if VEC:
        shm.barrier_all_vec()
    else:
        shm.barrier_all()
    if sub_vec_id() == 0:
        tl.store(shm.remote_ptr(counter, (rank + 1) % world), val + 1)
    if VEC:
        shm.barrier_all_vec()
    else:
        shm.barrier_all()


@triton.jit
def ring_team(counter, team, VEC: tl.constexpr):
    team_rank = shm.team_my_pe(team)
    if team_rank >= 0:
        val = tl.load(counter)
        if VEC:
            shm.barrier_vec(team)
        else:
            shm.barrier(team)
        if sub_vec_id() == 0:
            nxt = shm.team_translate_pe(team, (team_rank + 1) % shm.team_n_pes(team), shm.ACLSHMEM_TEAM_WORLD)
            tl.store(shm.remote_ptr(counter, nxt), val + 1)
        if VEC:
            shm.barrier_vec(team)
        else:
            shm.barrier(team)


def main():
    rank, world = common.init()
    counter = ash.aclshmem_create_tensor([1], dtype=torch.int64, device_id=rank)
    teams = [(0, True)]                      # (team, am I a member)
    if world >= 4:
        odd = ash.team_split_strided(0, 1, 2, world // 2)
        assert (odd >= 0) == (rank % 2 == 1), f"rank {rank}: team {odd}"
        assert odd < 0 or (ash.team_my_pe(odd) == rank // 2 and ash.team_n_pes(odd) == world // 2)
        teams.append((odd, odd >= 0))
    for vec in (False, True):
        counter.zero_()
        dist.barrier()
        ring_world[(1, 1, 1)](counter, rank, world, vec)
        dist.barrier()
        assert counter.item() == 1, f"rank {rank} barrier_all{'_vec' if vec else ''}: counter {counter.item()}"
        for team, member in teams:
            counter.zero_()
            dist.barrier()
            ring_team[(1, 1, 1)](counter, team, vec)
            dist.barrier()
            want = 1 if member else 0
            assert counter.item() == want, \
                f"rank {rank} barrier{'_vec' if vec else ''}(team {team}): counter {counter.item()}, want {want}"
    if world >= 4:
        ash.team_destroy(teams[1][0])
    ash.aclshmem_free_tensor(counter)
    common.finish()


if __name__ == "__main__":
    main()
