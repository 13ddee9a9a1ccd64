"""The simulator backend: launch (sim/launch.py), host side (heaps, collectives) and device
side (sim/primitives.py).

Importing this module must stay cheap (`import triton_dist` loads it to call `select()`):
torch is imported by the methods that need it, never here.
"""
from __future__ import annotations

import os
import sys
import threading
import uuid

from triton_dist import lifeline
from triton_dist.backend import Backend
from triton_dist.errors import TritonDistError
from triton_dist.host_checks import require_agreement, symm_nbytes, symm_shape_dtype, tensor_address

from . import board as B
from . import cache, context, heap, host_collectives, host_p2p, interp, naming, primitives, schedulers, spin
from .runtime import SimRuntime


class HeapSet:
    """Every rank's heap mapped in this process; the local one carries the allocator."""

    def __init__(self, maps, rank):
        self.maps = maps
        self.size = len(maps[0])
        self.bases = [heap.address_of(m) for m in maps]
        self.rank = rank
        self.allocator = heap.HeapAllocator(self.size)
        self.reserved = heap.RESERVED_BYTES
        self.tensors = {}                     # offset -> allocation, for free()
        # storage identity (StorageImpl address) of each freed tensor -> (its storage, its
        # allocation): a kernel launched on a freed tensor is told so, even once its slot is
        # reused.  The storage is kept so that its identity cannot be reused meanwhile; it is a
        # view of the heap and owns no memory.
        self.freed_storages = {}
        self.poisoned = 0                     # live allocations filled with poison (sim/initcheck.py)

    def remember_freed(self, t, a) -> None:
        key = _storage_id(t)
        if key is None:
            return
        if len(self.freed_storages) >= FREED_KEPT:
            self.freed_storages.pop(next(iter(self.freed_storages)))
        self.freed_storages[key] = (t.untyped_storage(), a)

    def freed_tensor(self, t):
        """The allocation of symmetric tensor t if it was freed (its `freed_at` says where), else None."""
        key = _storage_id(t)
        gone = self.freed_storages.get(key) if key is not None else None
        return gone[1] if gone is not None else None


class SimBackend(Backend):
    name = "sim"
    launch_options = frozenset({"schedule", "seed", "memory_model", "barrier_plus_one", "trace", "race_check",
                                "predict", "npu_compile"})
    auto_priority = 0          # the fallback of `auto`: runs anywhere
    interprets_kernels = True  # sim/interp.py runs the kernels its ranks launch
    # what a rank imports: triton and the language (kernels; triton's argument specialisation
    # imports gluon at a process's first launch, 0.3 s), the rank side of the simulator
    rank_modules = Backend.rank_modules + (
        "triton", "triton.language", "triton.experimental.gluon", "triton_dist.language", "triton_dist.language.extra.libshmem_device",
        "triton_dist.sim.launch", "triton_dist.sim.host_collectives", "triton_dist.sim.schedulers.free",
        "triton_dist.sim.schedulers.random_walk", "triton_dist.sim.schedulers.pct", "triton_dist.sim.trace",
        "triton_dist.sim.race", "triton_dist.sim.predict.record")

    @classmethod
    def detected(cls) -> bool:
        return True

    @classmethod
    def select(cls) -> None:
        # the default backend: kernels launched outside any rank run here too (a lone rank)
        cls.prepare()
        from .compat import npu
        if npu.wanted():        # TRITON_DIST_SHMEM_COMPAT=1: upstream host code, e.g. under pytest
            npu.install()

    @classmethod
    def prepare(cls) -> None:
        """What this process needs before its first simulated launch (idempotent): the
        interpreter's patches (sim/interp.py), and triton-ascend's builtins (sub_vec_id, ...)
        for upstream Ascend kernels where no triton-ascend provides them (sim/compat/cann.py).
        Neither changes a compiled launch."""
        interp.install(lone_rank)
        from .compat import cann
        cann.install()

    @classmethod
    def launch(cls, fn, args, kwargs, *, world_size, timeout, **options):
        from triton_dist.launcher import hide_launch_frames as __tracebackhide__  # pytest: the user's frames, not ours
        cls.prepare()          # a session whose default backend is another one launches here too
        from .launch import launch
        return launch(fn, args, kwargs, world_size=world_size, timeout=timeout, backend_name=cls.name, **options)

    def __init__(self):
        interp.install(lone_rank)
        self.rt = None
        self._owns_group = False

    # -- device side: one entry point, keyed by aclshmem symbol family --------------------------
    def device_call(self, family, *args):
        if family not in _READ_ONLY and spin.primitive_writes(family, context.core()):
            context.runtime().spin_reset()  # a primitive that writes is progress (sim/spin.py)
        return primitives.call(family, *args)

    def kernel_line(self, depth: int = 2) -> str:
        return context.kernel_line(depth + 1)

    # -- host side ---------------------------------------------------------------------------------
    def device(self):
        import torch
        return torch.device("cpu")

    def init(self, rank=None, world_size=None, *, heaps=None, board=None, schedule="free", seed=None,
             timeout=60.0, memory_model="ascend", barrier_plus_one=True, heap_bytes=None, store=None,
             shared=None, trace_dir=None, trace_t0=None, race=None, predict=None, evidence=None):
        import torch.distributed as dist
        if self.rt is not None:
            return
        # ranks started by launch() are set up and torn down by the launcher
        self._managed = heaps is not None
        if not dist.is_initialized():
            if store is not None:
                # gloo's own timeout is a second way out of a host collective that never completes
                import datetime
                dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                                        timeout=datetime.timedelta(seconds=max(30.0, float(timeout))))
            else:
                if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
                    raise TritonDistError(
                        "triton_dist.init(): no process group and no RANK/WORLD_SIZE in the environment; "
                        "start the script with torchrun --nproc-per-node=N, or run it through "
                        "triton_dist.launch / `triton-dist run -n N`")
                dist.init_process_group("gloo")
            self._owns_group = True
            # connectFullMesh returns on one rank before its peers have finished their side:
            # a rank that exited right away would break a slower peer's handshake.
            dist.barrier()
        rank, world_size = dist.get_rank(), dist.get_world_size()
        if heaps is None:
            heaps = self._named_heaps(rank, world_size, heap_bytes or heap.heap_bytes())
        hs = HeapSet(heaps, rank)
        board = board if board is not None else B.Board(world_size)
        sched = schedulers.make(schedule, rank, shared, board)
        self.rt = SimRuntime(rank, world_size, hs, board, cache.make(memory_model), sched, timeout,
                             barrier_plus_one)
        # what the device model saw (sim/evidence/): shared with the launcher when it made one
        from .evidence.board import EvidenceBoard
        from .evidence.watch import DeviceWatch
        from .observers import subscribe
        self.rt.evidence = evidence if evidence is not None else EvidenceBoard(local=True)
        subscribe(self.rt, DeviceWatch(self.rt))
        if callable(getattr(sched, "landed", None)):
            subscribe(self.rt, sched)        # the event log records each store in flight landing
        if trace_dir is not None:
            from .observers import subscribe
            from .trace import Tracer
            self.rt.tracer = Tracer(trace_dir, rank, trace_t0, shared, self.rt.evidence)
            subscribe(self.rt, self.rt.tracer)
        if race is not None:          # (directory for the logs, shared SlotTable) from launch()
            from .observers import subscribe
            from .race import RaceRecorder
            recorder = RaceRecorder(self.rt, *race)
            subscribe(self.rt, recorder)
            from .race import host        # host code's torch accesses of symmetric tensors
            self._host_accesses = host.install(recorder)
        if predict is not None:       # (directory, PerfSlots) from launch(): sim/predict records the ops
            from .predict.record import attach
            attach(self.rt, *predict)
        context.set_runtime(self.rt)
        host_collectives.install(self)     # user calls of torch.distributed collectives: scheduling points
        host_p2p.install(self)             # and its send/recv/isend/irecv (sim/host_p2p.py)
        sched.start()

    @staticmethod
    def _named_heaps(rank, world_size, nbytes):
        """torchrun: a nameless segment per rank (sim/heap.py), mapped by the peers through
        /proc/<pid>/fd: a rank killed anywhere in here leaves nothing in /dev/shm."""
        import torch.distributed as dist
        heap.sweep_stale()               # what ranks killed by older runs left behind
        own, fd = heap.create_named(f"{heap.NAME_PREFIX}{uuid.uuid4().hex[:12]}-r{rank}", nbytes)
        try:
            where = [None] * world_size
            dist.all_gather_object(where, (os.getpid(), fd))
            maps = [own if r == rank else heap.map_peer(*where[r], nbytes) for r in range(world_size)]
            dist.barrier()               # every peer has mapped mine: the fd may go
        finally:
            os.close(fd)
        return maps

    def finalize(self):
        import torch.distributed as dist
        if self.rt is None or getattr(self, "_managed", False):
            return
        context.set_runtime(None)
        self.rt = None
        if self._owns_group and dist.is_initialized():
            dist.destroy_process_group()
        self._owns_group = False

    def _runtime(self):
        rt = context.runtime()
        if rt.lone:         # the lone rank runs kernels launched outside any rank; no host API there
            raise context.not_initialized()
        return rt

    def rank(self):
        return self._runtime().rank

    def world_size(self):
        return self._runtime().world_size

    def _collective(self, what, fn):
        rt = self._runtime()
        lifeline.exit_if_orphaned()
        rt.board.set(rt.rank, -1, B.HOST_COLLECTIVE, what, _caller())
        if rt.tracer:
            rt.tracer.begin(what)
        try:
            if rt.observers is not None:
                rt.observers.collective_arrive()
            with rt.sched.host_call(what), host_collectives.inside():
                try:
                    out = fn()
                except RuntimeError as e:      # gloo's raw error when a peer is not in it
                    gone = [r for r in range(rt.world_size)
                            if r != rt.rank and int(rt.board.slot(r, -1)["state"]) == B.DONE]
                    if gone or host_collectives.peer_lost(e):
                        raise host_collectives.peer_gone(what, gone, e) from None
                    raise
            if rt.observers is not None:
                rt.observers.collective_depart()
            return out
        finally:
            rt.board.set_state(rt.rank, -1, B.RUNNING)
            if rt.tracer:
                rt.tracer.end(what)

    def _agree(self, what, mine):
        """All ranks must pass the same `mine`; otherwise every rank raises the same error."""
        import torch.distributed as dist
        rt = self._runtime()
        allv = [None] * rt.world_size
        self._collective(what, lambda: dist.all_gather_object(allv, mine))
        require_agreement(what, allv)

    def symm_tensor(self, shape, dtype, poison: str | None = None):
        """poison: the call that asked for memory as aclshmem_malloc gives it (sim/initcheck.py):
        filled with a poison pattern instead of zeros (also with TRITON_DIST_SIM_INIT_CHECK=1)."""
        import torch
        import torch.distributed as dist
        from . import initcheck
        rt = self._runtime()
        shape, dtype = symm_shape_dtype(shape, dtype)
        hs = rt.heaps
        self._agree("symm_tensor", ("symm_tensor", hs.allocator.next_id, shape, str(dtype)))
        nbytes = symm_nbytes(shape, dtype)
        a = hs.allocator.alloc(nbytes, f"symm tensor #{hs.allocator.next_id} ({str(dtype)[6:]}{list(shape)})")
        a.itemsize = torch.empty((), dtype=dtype).element_size()
        f = _user_frame()
        a.origin = naming.origin(f.f_code.co_filename, f.f_lineno) if f is not None else ""
        library = initcheck.library_caller(sys._getframe())     # the kernel library's workspace?
        if library is not None:     # named as the library's, not after the user's variable
            a.origin = f"the kernel library's workspace, allocated at {library} for the call at {_caller()}"
        buf = hs.maps[rt.rank]
        t = torch.frombuffer(buf, dtype=torch.uint8, count=a.nbytes, offset=a.offset)
        if poison is None and library is None and initcheck.native_enabled():
            poison = f"triton_dist.symm_tensor with {initcheck.ENV}=1"
        if poison is not None:
            initcheck.poison(hs, rt.rank, a, _caller(), poison)
        else:
            t.zero_()
            a.site = _caller()
        out = t[:nbytes].view(dtype).view(shape)     # a zero-size one too: a view of its slot, so free finds it
        hs.tensors[a.offset] = a
        if rt.rank == 0 or rt.evidence.local:     # every rank allocates the same: one writes the table
            rt.evidence.allocated(a)
        # Nobody may write into a peer's new tensor before the peer has zeroed it.
        self._collective("symm_tensor", dist.barrier)
        return out

    def free(self, t):
        import torch
        rt = self._runtime()
        hs = rt.heaps
        if not isinstance(t, torch.Tensor):
            raise TritonDistError(f"free: expected a tensor from symm_tensor, got {type(t).__name__}")
        gone = hs.freed_tensor(t)
        if gone is not None:
            raise TritonDistError(f"free: {gone.label} was freed already (triton_dist.free at {gone.freed_at}); "
                                  f"free each symmetric tensor once")
        off = tensor_address(t) - hs.bases[rt.rank]
        a = hs.tensors.get(off)
        if a is None:
            raise TritonDistError("free: this tensor was not returned by triton_dist.symm_tensor")
        self._agree("free", ("free", a.aid))
        del hs.tensors[off]
        from . import initcheck
        initcheck.forget(hs, a)
        hs.allocator.release(off, _caller())
        if rt.rank == 0 or rt.evidence.local:
            rt.evidence.freed(off)
        hs.remember_freed(t, a)

    def barrier(self):
        import torch.distributed as dist
        self._collective("barrier", dist.barrier)


def lone_rank():
    """The runtime of kernels launched in a process that is no rank (issue 26 item 7): one
    rank of world size 1 with its own heap, the free schedule and the session's memory model,
    made once, as `launch(..., world_size=1)` would run them (Triton's interpreter runs a
    kernel anywhere; so does the simulator).  Only kernels use it: the host API still needs
    init() or a launch.  A torchrun rank that has not called init() is told to."""
    if "RANK" in os.environ:            # a rank (torchrun) that has not called init(): it must
        raise context.not_initialized()
    rt = context.current()
    if rt is not None:
        return rt
    from triton_dist import launcher
    from .launch import OPTION_DEFAULTS
    with _LONE_LOCK:
        if context.current() is None:
            nbytes = heap.heap_bytes()
            import mmap
            # private: ranks forked later from this process do not share it
            hs = HeapSet([mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)], 0)
            board = B.Board(1)
            model = launcher.DEFAULTS.get("memory_model") or OPTION_DEFAULTS["memory_model"]
            timeout = 60.0
            rt = SimRuntime(0, 1, hs, board, cache.make(model), schedulers.make("free", 0, None, board), timeout,
                            True)
            rt.lone = True
            board.set_state(0, -1, B.RUNNING)
            context.set_runtime(rt)
    return context.current()


_LONE_LOCK = threading.Lock()

FREED_KEPT = 4096      # freed tensors remembered for "was freed" messages (oldest forgotten first)


def _storage_id(t):
    """The identity of the memory block a tensor views (its StorageImpl), or None where torch
    does not expose it."""
    return getattr(t.untyped_storage(), "_cdata", None)


def _read_only_families():
    from triton_dist import symbols as S
    return frozenset(s.family for s in (*S.DL_OPS.values(), *S.SHMEM_OPS.values())
                     if s.effects in (S.NONE, S.READ))


_READ_ONLY = _read_only_families()


# the user's call site, shared with host_p2p (sim/call_site.py, below this module)
from .call_site import caller as _caller, user_frame as _user_frame  # noqa: E402,F401
