"""The `shmem` host package (hicann/shmem's Python binding, `import shmem as ash`) over the
simulator's heap, for upstream Ascend tests and tutorials run with `triton-dist run
--shmem-compat` (or TRITON_DIST_SHMEM_COMPAT=1).  Installed by install() (sim/compat/npu.py)
only where no real `shmem` can be imported.

Inside a simulated rank the heap already exists (the launcher made it): aclshmem_init checks
that the rank and world size it is given are this rank's and returns 0; tensors come from
triton_dist's symmetric heap (collective, the same offset on every rank, not zeroed: filled
with a poison pattern, sim/initcheck.py) and go back
with triton_dist.free; teams are sim/teams.py's.  The names and return conventions are the
binding's (evidence F): 0 for success, a team index or -1 for non-members.
"""
from __future__ import annotations

import enum

from triton_dist import symbols as S
from triton_dist.errors import TritonDistError

ACLSHMEM_TEAM_WORLD = S.ACLSHMEM_TEAM_WORLD
ACLSHMEM_TEAM_INVALID = -1


class OpEngineType(enum.IntEnum):
    MTE = S.OP_ENGINE_TYPES["MTE"]
    SDMA = S.OP_ENGINE_TYPES["SDMA"]
    ROCE = S.OP_ENGINE_TYPES["ROCE"]
    UDMA = S.OP_ENGINE_TYPES["UDMA"]


class OptionAttr:
    def __init__(self):
        self.data_op_engine_type = OpEngineType.MTE


class InitAttr:
    def __init__(self):
        self.my_rank = -1
        self.n_ranks = -1
        self.local_mem_size = 0
        self.ip_port = ""
        self.option_attr = OptionAttr()


def _rt():
    from triton_dist.sim import context
    return context.runtime()


def set_conf_store_tls(enable, path=""):
    """TLS of the bootstrap store: nothing to configure in the simulator."""
    return 0


def aclshmem_init(attr: InitAttr) -> int:
    import triton_dist
    rt = _rt()
    if attr.my_rank != rt.rank or attr.n_ranks != rt.world_size:
        raise TritonDistError(f"shmem.aclshmem_init: InitAttr says rank {attr.my_rank} of {attr.n_ranks}, but this "
                              f"simulated rank is {rt.rank} of {rt.world_size} (set my_rank/n_ranks from "
                              f"torch.distributed or RANK/WORLD_SIZE)")
    if attr.option_attr.data_op_engine_type != OpEngineType.MTE:
        raise TritonDistError(f"shmem.aclshmem_init: the simulator models the MTE data engine only, got "
                              f"{attr.option_attr.data_op_engine_type!r}")
    if attr.local_mem_size and attr.local_mem_size > rt.heaps.size:
        import warnings
        warnings.warn(f"shmem.aclshmem_init: local_mem_size {attr.local_mem_size} is larger than the simulator's "
                      f"heap ({rt.heaps.size} bytes, TRITON_DIST_HEAP_SIZE); allocations beyond it will fail",
                      stacklevel=2)
    triton_dist.barrier()
    return 0


def aclshmem_finalize() -> int:
    return 0        # the launcher tears the heaps down when the rank ends


def aclshmem_create_tensor(shape, dtype=None, device_id=None):
    """As on the NPU, the memory is not zeroed: it holds a poison pattern, and a kernel reading
    a word of it before anything wrote it is reported (sim/initcheck.py)."""
    import torch
    from triton_dist import backend
    shape = [shape] if isinstance(shape, int) else list(shape)
    return backend.active().symm_tensor(tuple(shape), dtype if dtype is not None else torch.float32,
                                        poison="shmem.aclshmem_create_tensor: aclshmem_malloc does not zero")


def aclshmem_free_tensor(t) -> None:
    import triton_dist
    triton_dist.free(t)


def my_pe() -> int:
    return _rt().rank


def pe_count() -> int:
    return _rt().world_size


n_pes = pe_count


def team_split_strided(parent, start, stride, size) -> int:
    """Collective: every PE passes the same arguments; members get the new team, others -1."""
    from triton_dist.sim import teams
    import triton_dist
    from triton_dist import backend
    backend.active()._agree("team_split_strided", ("team_split_strided", int(parent), int(start), int(stride),
                                                    int(size)))
    team = teams.split_strided(_rt(), int(parent), int(start), int(stride), int(size))
    triton_dist.barrier()
    return team


def team_destroy(team) -> None:
    from triton_dist.sim import teams
    teams.destroy(_rt(), team)


def team_my_pe(team) -> int:
    from triton_dist.sim import teams
    return teams.my_pe(_rt(), team)


def team_n_pes(team) -> int:
    from triton_dist.sim import teams
    return teams.n_pes(_rt(), team)


def team_translate_pe(src_team, src_pe, dest_team) -> int:
    from triton_dist.sim import teams
    return teams.translate_pe(_rt(), src_team, src_pe, dest_team)
