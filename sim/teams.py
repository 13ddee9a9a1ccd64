"""Teams beyond ACLSHMEM_TEAM_WORLD (docs/device_model.md; evidence E, hicann/shmem @81c95ba).

A team is a lattice of world PEs: (start, stride, size), its members world PEs
start + i*stride for i < size; i is a member's index in the team.  Teams are made on the host
by `split_strided(parent, start, stride, size)`, called by every PE: members get the new team's
index, non-members ACLSHMEM_TEAM_INVALID (-1).  The device library picks the index as the first
free slot, locally, with no communication, so indices agree only if every PE makes and destroys
teams in the same order; the simulator checks that every PE passed the same arguments (the
split is a collective).  Each team index has its own barrier counter and flag in the heap's
reserved area (team 0: the world barrier's).

Device side (sim/primitives.py): team_my_pe / team_n_pes (-1 for an invalid or unknown team),
team_translate_pe (-1 if a team is invalid, the PE is out of range, or not a member of the
destination: upstream reads an entry it never wrote there, undefined), barrier(team) and
barrier_vec(team) (return at once for -1).
"""
from __future__ import annotations

from dataclasses import dataclass

from triton_dist import symbols as S
from triton_dist.errors import TritonDistError
from triton_dist.symm_heap import RESERVED_BYTES, SYNC_COUNTER_OFFSET, SYNC_POOL_OFFSET

INVALID = -1
# per team index: its counter line and its flag line (team 0 = the world barrier's two lines)
TEAM_SYNC_BYTES = 128
MAX_TEAMS = RESERVED_BYTES // TEAM_SYNC_BYTES // 2      # the second half of the area stays free


@dataclass(frozen=True)
class Team:
    start: int       # world PE of index 0
    stride: int      # in world PEs
    size: int

    def pe(self, i: int) -> int:
        return self.start + i * self.stride

    def index_of(self, world_pe: int) -> int:
        d = world_pe - self.start
        if d < 0 or d % self.stride or d // self.stride >= self.size:
            return INVALID
        return d // self.stride


def table(rt) -> dict:
    """team index -> Team for this rank (the world team always at 0)."""
    t = getattr(rt, "teams", None)
    if t is None:
        t = rt.teams = {S.ACLSHMEM_TEAM_WORLD: Team(0, 1, rt.world_size)}
    return t


def get(rt, team: int):
    return table(rt).get(int(team)) if int(team) != INVALID else None


def sync_offsets(team: int) -> tuple[int, int]:
    """(counter offset, flag offset) of a team's barrier in every member's heap."""
    base = int(team) * TEAM_SYNC_BYTES
    return SYNC_COUNTER_OFFSET + base, SYNC_POOL_OFFSET + base


def split_strided(rt, parent: int, start: int, stride: int, size: int) -> int:
    """The new team's index on this PE, or -1 if this PE is not a member (host only)."""
    teams = table(rt)
    p = teams.get(int(parent))
    what = f"team_split_strided(parent={parent}, start={start}, stride={stride}, size={size})"
    if p is None:
        raise TritonDistError(f"{what}: parent team {parent} does not exist on rank {rt.rank}")
    if start < 0 or start >= p.size or size <= 0 or size > p.size or stride < 1:
        raise TritonDistError(f"{what}: need 0 <= start < {p.size} (the parent's size), 0 < size <= {p.size} "
                              f"and stride >= 1")
    gstart, gstride = p.pe(start), p.stride * stride
    if gstart + gstride * (size - 1) >= rt.world_size:
        raise TritonDistError(f"{what}: its last PE would be {gstart + gstride * (size - 1)}, but the world has "
                              f"{rt.world_size} PEs")
    team = Team(gstart, gstride, size)
    if team.index_of(rt.rank) == INVALID:
        return INVALID
    free = next((i for i in range(MAX_TEAMS) if i not in teams), None)
    if free is None:
        raise TritonDistError(f"{what}: all {MAX_TEAMS} team slots are in use; destroy teams you no longer need")
    teams[free] = team
    return free


def destroy(rt, team: int) -> None:
    if int(team) in (INVALID, S.ACLSHMEM_TEAM_WORLD):
        return
    table(rt).pop(int(team), None)


def my_pe(rt, team: int) -> int:
    t = get(rt, team)
    return INVALID if t is None else t.index_of(rt.rank)


def n_pes(rt, team: int) -> int:
    t = get(rt, team)
    return INVALID if t is None else t.size


def translate_pe(rt, src: int, pe: int, dst: int) -> int:
    s, d = get(rt, src), get(rt, dst)
    if s is None or d is None or not 0 <= pe < s.size:
        return INVALID
    return d.index_of(s.pe(pe))
