"""The NPU runtime path (backend="npu"): shmem (hicann/shmem) symmetric heap, torch_npu, hccl.

Host side, as docs/semantics.md §5 describes the `shmem` package:

    ash.set_conf_store_tls(False, "")
    a = ash.InitAttr(); a.my_rank, a.n_ranks, a.local_mem_size, a.ip_port = ...
    a.option_attr.data_op_engine_type = ash.OpEngineType.MTE
    ash.aclshmem_init(a) == 0
    t = ash.aclshmem_create_tensor(shape, dtype=..., device_id=rank); ash.aclshmem_free_tensor(t)
    ash.aclshmem_finalize()

with a torch.distributed process group on `hccl` (torch_npu) for the ranks, and a gloo
group beside it for host-side agreement checks.  Device side: kernels are compiled by
triton-ascend, with the distributed lowering hooked into its ttadapter stage
(npu_compile.py).

Configuration (environment):
    TRITON_DIST_OP_ENGINE       transport engine: MTE (default), SDMA, ROCE or UDMA
    TRITON_DIST_NPU_HEAP_BYTES  symmetric heap per PE (default 1 GiB)
    TRITON_DIST_SHMEM_IP_PORT   shmem bootstrap address (default: tcp://$MASTER_ADDR:<a port rank 0
                                found free on its host, agreed on by every rank through the
                                process group>, so that jobs sharing a host never collide)
    TRITON_DIST_ACLSHMEM_BITCODE  the aclshmem wrapper bitcode (npu_compile.py)
    TRITON_DIST_ACLSHMEM_ARCH     c220 (Atlas A2/A3, default) or c310: which wrapper variants

Everything NPU-related (torch_npu, shmem, triton-ascend, CANN) is imported inside the
methods that need it: importing this module on a CPU machine touches none of them.
"""
from __future__ import annotations

import importlib.util
import os

from triton_dist import symbols as S
from triton_dist.backend import Backend, is_ascend
from triton_dist.errors import TritonDistError
from triton_dist.host_checks import require_agreement, symm_shape_dtype

ENGINE_ENV = "TRITON_DIST_OP_ENGINE"
HEAP_ENV = "TRITON_DIST_NPU_HEAP_BYTES"
IP_PORT_ENV = "TRITON_DIST_SHMEM_IP_PORT"
DEFAULT_ENGINE = "MTE"
DEFAULT_HEAP_BYTES = 1 << 30


def missing() -> list:
    """What this machine lacks for backend 'npu' (empty when it has everything).

    Beyond the packages, the capabilities of its triton-ascend that distributed kernels
    need (npu_compile.triton_ascend_problems: the `_semantic` frontend, hivm.hir.custom
    support, a driver that takes shmem-heap pointers) and the aclshmem wrapper bitcode
    (npu_compile.bitcode_for_kernels), each naming what to install."""
    from .npu_compile import triton_ascend_problems
    need = []
    if not is_ascend():
        need.append("an Ascend NPU (npu-smi is not on PATH)")
    for module, what in (("torch_npu", "torch_npu (pip install 'triton_dist[npu]'; needs CANN)"),
                         ("shmem", "the shmem package (built from hicann/shmem)")):
        if importlib.util.find_spec(module) is None:
            need.append(what)
    need.extend(triton_ascend_problems())
    if not need:               # all there: then also the aclshmem wrappers kernels link
        from .npu_compile import bitcode_for_kernels
        try:
            bitcode_for_kernels()
        except TritonDistError as e:
            need.append(str(e))
    return need


def engine_from_env(value: str | None = None) -> str:
    """The transport engine name (MTE, SDMA, ROCE, UDMA) from TRITON_DIST_OP_ENGINE."""
    name = (value if value is not None else os.environ.get(ENGINE_ENV, "")).strip().upper() or DEFAULT_ENGINE
    if name not in S.OP_ENGINE_TYPES:
        raise TritonDistError(f"{ENGINE_ENV} must be one of {', '.join(S.OP_ENGINE_TYPES)} (default "
                              f"{DEFAULT_ENGINE}), got {name!r}")
    return name


def heap_bytes_from_env(value: str | None = None) -> int:
    text = (value if value is not None else os.environ.get(HEAP_ENV, "")).strip()
    if not text:
        return DEFAULT_HEAP_BYTES
    try:
        n = int(text, 0)
    except ValueError:
        n = -1
    if n <= 0:
        raise TritonDistError(f"{HEAP_ENV} must be a positive number of bytes (e.g. {DEFAULT_HEAP_BYTES}), "
                              f"got {text!r}")
    return n


def free_port() -> int:
    """A TCP port free on this host right now (the OS picks it)."""
    import socket
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def shmem_ip_port(rank: int, broadcast) -> str:
    """The shmem bootstrap address every rank of this job uses.

    TRITON_DIST_SHMEM_IP_PORT when set; otherwise rank 0 (where shmem's bootstrap listens)
    takes a port that is free on its host and `broadcast(value)` (rank 0's value, returned
    on every rank: the process group's store) makes every rank agree on it.  A fixed port
    would make two jobs on one host collide."""
    if os.environ.get(IP_PORT_ENV):
        return os.environ[IP_PORT_ENV]
    port = broadcast(free_port() if rank == 0 else None)
    return f"tcp://{os.environ.get('MASTER_ADDR', '127.0.0.1')}:{int(port)}"


def broadcast_from_rank0(group=None):
    """broadcast(value) over torch.distributed: rank 0's value on every rank."""
    import torch.distributed as dist

    def broadcast(value):
        box = [value]
        dist.broadcast_object_list(box, src=0, group=group)
        return box[0]
    return broadcast


class NpuBackend(Backend):
    name = "npu"
    launch_options = frozenset()    # the simulator's options do not apply to real NPUs
    auto_priority = 20              # an NPU host runs Ascend kernels, whatever else it has

    @classmethod
    def detected(cls) -> bool:
        return is_ascend()

    @classmethod
    def missing(cls) -> list:
        return missing()

    @classmethod
    def launch(cls, fn, args, kwargs, *, world_size, timeout, **options):
        import time

        from triton_dist.launcher import LaunchResult
        start = time.monotonic()
        values = launch(fn, *args, world_size=world_size, timeout=timeout, **kwargs)
        return LaunchResult(values=values, wall_seconds=time.monotonic() - start)

    def __init__(self):
        need = missing()
        if need:
            raise TritonDistError(f"backend 'npu' needs {', '.join(need)}; on this machine use the simulator "
                                  f"(TRITON_DIST_BACKEND=sim)")
        from . import npu_compile
        npu_compile.install()
        self._ash = None
        self._owns_group = False
        self._cpu_group = None
        self._tensors = {}            # data_ptr -> (allocation number, shape, dtype)
        self._next_id = 0
        self._local_rank = 0

    # -- device side ------------------------------------------------------------------------------
    def device_call(self, family, *args):
        raise TritonDistError(
            f"an interpreted kernel called the aclshmem primitive {family!r} on backend 'npu': on the NPU, "
            f"kernels are compiled by triton-ascend and call the device library themselves; unset "
            f"TRITON_INTERPRET, or run on the simulator (TRITON_DIST_BACKEND=sim)")

    # -- host side -----------------------------------------------------------------------------------
    def init(self, rank=None, world_size=None, **options):
        if self._ash is not None:
            return
        import torch
        import torch.distributed as dist
        import torch_npu  # noqa: F401 - registers the npu device and the hccl backend

        engine = engine_from_env(options.get("engine"))
        heap = int(options.get("heap_bytes") or heap_bytes_from_env())
        if not dist.is_initialized():
            if rank is None and "RANK" not in os.environ:
                raise TritonDistError(
                    "triton_dist.init(): no process group and no RANK/WORLD_SIZE in the environment; start the "
                    "script with torchrun --nproc-per-node=N (one process per NPU)")
            if rank is not None:
                os.environ.setdefault("RANK", str(rank))
                os.environ.setdefault("WORLD_SIZE", str(world_size))
                os.environ.setdefault("LOCAL_RANK", str(rank))
                os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
                os.environ.setdefault("MASTER_PORT", "29500")
            self._local_rank = int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
            torch.npu.set_device(self._local_rank)
            dist.init_process_group("hccl")
            self._owns_group = True
        else:
            self._local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
            torch.npu.set_device(self._local_rank)
        self._cpu_group = dist.new_group(backend="gloo")
        import shmem as ash
        ash.set_conf_store_tls(False, "")
        attr = ash.InitAttr()
        attr.my_rank = dist.get_rank()
        attr.n_ranks = dist.get_world_size()
        attr.local_mem_size = heap
        attr.ip_port = shmem_ip_port(dist.get_rank(), broadcast_from_rank0(self._cpu_group))
        attr.option_attr.data_op_engine_type = getattr(ash.OpEngineType, engine)
        ret = ash.aclshmem_init(attr)
        if ret != 0:
            raise TritonDistError(f"aclshmem_init failed with {ret} (rank {attr.my_rank} of {attr.n_ranks}, "
                                  f"heap {heap} bytes, engine {engine}, bootstrap {attr.ip_port}); check that "
                                  f"the port is free and {HEAP_ENV} fits in NPU memory")
        self._ash = ash

    def _shmem(self):
        if self._ash is None:
            raise TritonDistError("backend 'npu' is not initialized: call triton_dist.init() first")
        return self._ash

    def finalize(self):
        if self._ash is None:
            return
        import torch.distributed as dist
        self._ash.aclshmem_finalize()
        self._ash = None
        self._tensors.clear()
        if self._owns_group and dist.is_initialized():
            dist.destroy_process_group()
        self._owns_group = False

    def rank(self):
        self._shmem()
        import torch.distributed as dist
        return dist.get_rank()

    def world_size(self):
        self._shmem()
        import torch.distributed as dist
        return dist.get_world_size()

    def device(self):
        import torch
        return torch.device("npu", self._local_rank)

    def _agree(self, what, mine):
        import torch.distributed as dist
        values = [None] * dist.get_world_size()
        dist.all_gather_object(values, mine, group=self._cpu_group)
        require_agreement(what, values)

    def symm_tensor(self, shape, dtype):
        import torch
        ash = self._shmem()
        shape, dtype = symm_shape_dtype(shape, dtype)
        self._agree("symm_tensor", ("symm_tensor", self._next_id, shape, str(dtype)))
        t = ash.aclshmem_create_tensor(list(shape), dtype=dtype, device_id=self._local_rank)
        t.zero_()
        torch.npu.synchronize()
        self._tensors[t.data_ptr()] = (self._next_id, shape, dtype)
        self._next_id += 1
        self.barrier()          # nobody writes into a peer's tensor before the peer has zeroed it
        return t

    def free(self, t):
        import torch
        ash = self._shmem()
        if not isinstance(t, torch.Tensor) or t.data_ptr() not in self._tensors:
            raise TritonDistError("free: this tensor was not returned by triton_dist.symm_tensor (or was freed "
                                  "already)")
        aid = self._tensors[t.data_ptr()][0]
        self._agree("free", ("free", aid))
        torch.npu.synchronize()
        del self._tensors[t.data_ptr()]
        ash.aclshmem_free_tensor(t)

    def barrier(self):
        import torch
        import torch.distributed as dist
        self._shmem()
        torch.npu.synchronize()
        dist.barrier(group=self._cpu_group)


# --- starting ranks -----------------------------------------------------------------------------------

def _rank_main(rank, world_size, port, fn, args, kwargs, conn):
    import traceback
    try:
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                          LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                          TRITON_DIST_BACKEND="npu")
        import triton_dist
        triton_dist.init()
        try:
            value = fn(*args, **kwargs)
        finally:
            triton_dist.finalize()
        conn.send(("ok", value))
    except BaseException as e:  # noqa: BLE001 - reported to the launcher
        conn.send(("err", type(e).__name__, str(e), traceback.format_exc()))
    finally:
        conn.close()


def launch(fn, *args, world_size, timeout=300.0, **kwargs) -> list:
    """Run fn(*args, **kwargs) in `world_size` NPU ranks (one process per NPU); their values in
    rank order.  fn must be importable by name (a module-level function): ranks are spawned."""
    import socket

    import multiprocess as mp

    from triton_dist.errors import RankError
    need = missing()
    if need:
        raise TritonDistError(f"launch on the NPU needs {', '.join(need)}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")      # NPU runtimes cannot be forked once initialized
    procs, pipes = [], []
    for r in range(world_size):
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_rank_main, args=(r, world_size, port, fn, args, kwargs, send), daemon=True)
        p.start()
        procs.append(p)
        pipes.append(recv)
    values = []
    try:
        for r, (p, conn) in enumerate(zip(procs, pipes)):
            if not conn.poll(timeout):
                raise TritonDistError(f"NPU rank {r} did not finish within {timeout} s")
            out = conn.recv()
            if out[0] != "ok":
                raise RankError(r, out[1], out[2], out[3])
            values.append(out[1])
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return values
