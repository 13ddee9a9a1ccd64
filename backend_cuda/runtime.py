"""Host side of backend="cuda": one symmetric heap per rank in torch symmetric memory.

Why torch symmetric memory (not NVSHMEM through nvshmem4py): it ships with torch, needs no
extra wheel or bootstrap, and gives exactly what the device library needs, the address of
every peer's buffer mapped into this process (`handle.get_buffer(peer, ...)`); a Triton
kernel storing through such an address over NVLink is a plain store.  The heap is one
buffer of TRITON_DIST_HEAP_SIZE bytes (default 1 GiB) rendezvoused once at init; symmetric
tensors are carved from it by the shared deterministic allocator (triton_dist/symm_heap.py),
so an allocation has the same offset on every rank, as on Ascend.  Ranks that share a GPU
(TRITON_DIST_CUDA_SHARE_GPUS) map each other's heaps with CUDA IPC instead (heaps.py):
torch symmetric memory refuses two ranks on one device.

Process groups: the default group is "cpu:gloo,cuda:nccl" (user collectives on GPU tensors
use NCCL); a gloo group does the host barriers and agreement checks, and the
symmetric-memory rendezvous only needs the group's store.  One rank per GPU: rank r
uses GPU LOCAL_RANK.  Nothing here touches CUDA before init(): importing triton_dist on a
machine without a GPU (or in a launcher that forks ranks) never initializes it.

Environment: TRITON_DIST_HEAP_SIZE (bytes), TRITON_DIST_WAIT_TIMEOUT (seconds a device-side
wait may see no progress before it gives up and reports; default 10),
TRITON_DIST_CUDA_SHARE_GPUS=1 (let several ranks share a GPU, rank r on GPU r mod count: for
checking kernels on a machine with fewer GPUs than ranks; processes time-slice a GPU, so
waits are slow and no figure measured that way means anything).
"""
from __future__ import annotations

import importlib.util
import os
import shutil

import numpy as np

from triton_dist.backend import Backend
from triton_dist.errors import DeadlockError, TritonDistError
from triton_dist.host_checks import require_agreement, symm_nbytes, symm_shape_dtype, tensor_address
from triton_dist.symm_heap import RESERVED_BYTES, HeapAllocator

from . import devlib

HEAP_ENV = "TRITON_DIST_HEAP_SIZE"
SHARE_ENV = "TRITON_DIST_CUDA_SHARE_GPUS"
TIMEOUT_ENV = "TRITON_DIST_WAIT_TIMEOUT"
DEFAULT_HEAP_BYTES = 1 << 30
DEFAULT_WAIT_TIMEOUT = 10.0
# NVLink multicast (NVLS) can take a shared host's GPUs out of service; nothing here uses it.
PG_BACKENDS = "cpu:gloo,cuda:nccl"
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def device_count() -> int:
    """GPUs this machine has, without initializing CUDA in this process (NVML through torch)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    import torch
    return torch.cuda.device_count()


def sharing_gpus() -> bool:
    return os.environ.get(SHARE_ENV, "").strip() == "1"


def ranks_fit(world_size: int) -> str | None:
    """None if `world_size` ranks can run here, else why not."""
    ndev = device_count()
    if world_size <= ndev or (ndev and sharing_gpus()):
        return None
    return (f"{world_size} ranks need {world_size} GPUs (one per rank); this machine has {ndev} "
            f"(set {SHARE_ENV}=1 to let ranks share GPUs, for checking correctness only)")


def missing() -> list:
    """What this machine lacks for backend 'cuda' (empty when it has everything)."""
    need = []
    if shutil.which("nvidia-smi") is None:
        return ["an NVIDIA GPU (nvidia-smi is not on PATH)"]
    import torch
    if not torch.version.cuda:
        need.append(f"a CUDA build of torch (this one is {torch.__version__})")
    if importlib.util.find_spec("llvmlite") is None:
        need.append("llvmlite (pip install llvmlite), to assemble the device library")
    return need


def _positive(env: str, default, kind=float):
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    try:
        v = kind(text, 0) if kind is int else kind(text)
    except ValueError:
        v = -1
    if v <= 0:
        raise TritonDistError(f"{env} must be a positive number, got {text!r}")
    return v


class CudaBackend(Backend):
    name = "cuda"
    launch_options = frozenset()    # schedules, memory models, traces and race checks are the simulator's
    auto_priority = 10              # below npu: an NPU host with an NVIDIA card still runs Ascend kernels

    @classmethod
    def detected(cls) -> bool:
        return shutil.which("nvidia-smi") is not None

    @classmethod
    def missing(cls) -> list:
        return missing()

    @classmethod
    def ranks_fit(cls, world_size: int):
        return ranks_fit(world_size)

    @classmethod
    def max_ranks(cls):
        return None if sharing_gpus() else device_count()

    @classmethod
    def launch(cls, fn, args, kwargs, *, world_size, timeout, **options):
        from .launch import launch
        return launch(fn, args, kwargs, world_size=world_size, timeout=timeout, machine=cls)

    def __init__(self):
        self._heap = None
        self._report = None
        self._owns_group = False
        self._tensors = {}              # heap offset -> Allocation
        self._alloc = None
        self._bases = []
        self._close = lambda: None
        self._cpu = None                # gloo group for host barriers and agreement checks
        self._wait_timeout = 0.0
        self._local_rank = 0

    # -- device side ------------------------------------------------------------------------------
    def device_call(self, family, *args):
        raise TritonDistError(
            f"an interpreted kernel called the aclshmem primitive {family!r} on backend 'cuda': CUDA kernels "
            f"are compiled and call the device library themselves; unset TRITON_INTERPRET, or run on the "
            f"simulator (TRITON_DIST_BACKEND=sim)")

    # -- host side -----------------------------------------------------------------------------------
    def init(self, rank=None, world_size=None, *, store=None, timeout=None, heap_bytes=None, **options):
        if self._heap is not None:
            return
        for k, v in SAFE_ENV.items():
            os.environ.setdefault(k, v)
        need = missing()
        if need:
            raise TritonDistError(f"backend 'cuda' needs {', '.join(need)}; on this machine use the simulator "
                                  f"(TRITON_DIST_BACKEND=sim)")
        import datetime

        import torch
        import torch.distributed as dist
        if not dist.is_initialized():
            td = datetime.timedelta(seconds=max(60.0, float(timeout or 0)))
            # torch.distributed calls on CUDA tensors go to NCCL (its communicator is made on
            # first use), on CPU tensors to gloo
            if store is not None:
                dist.init_process_group(PG_BACKENDS, store=store, rank=rank, world_size=world_size, timeout=td)
            elif "RANK" in os.environ:
                dist.init_process_group(PG_BACKENDS, timeout=td)
            else:
                raise TritonDistError(
                    "triton_dist.init(): no process group and no RANK/WORLD_SIZE in the environment; start the "
                    "script with torchrun --nproc-per-node=N (one process per GPU) or with triton_dist.launch")
            self._owns_group = True
        r, n = dist.get_rank(), dist.get_world_size()
        # our own host barriers and agreement checks stay on gloo whatever the default group is
        self._cpu = dist.new_group(backend="gloo")
        if n > devlib.MAX_PES:
            raise TritonDistError(f"backend 'cuda' supports at most {devlib.MAX_PES} ranks, got {n}")
        self._local_rank = int(os.environ.get("LOCAL_RANK", r))
        ndev = torch.cuda.device_count()
        if self._local_rank >= ndev and not (ndev and sharing_gpus()):
            raise TritonDistError(f"rank {r} would use GPU {self._local_rank}, but this machine has {ndev}: backend "
                                  f"'cuda' runs one rank per GPU, so use at most {ndev} ranks per machine "
                                  f"(or set {SHARE_ENV}=1 to check correctness with shared GPUs)")
        self._local_rank %= ndev
        torch.cuda.set_device(self._local_rank)
        dev = torch.device("cuda", self._local_rank)
        nbytes = int(heap_bytes or _positive(HEAP_ENV, DEFAULT_HEAP_BYTES, int))
        wait_timeout = _positive(TIMEOUT_ENV, DEFAULT_WAIT_TIMEOUT)
        if timeout:
            # a device wait must give up (and report) well before the launcher kills the rank
            wait_timeout = min(wait_timeout, max(1.0, float(timeout) / 3))
        self._agree("init", ("init", nbytes))
        from . import heaps
        if int(os.environ.get("LOCAL_WORLD_SIZE", n)) > ndev:        # ranks share GPUs
            heap, self._bases, self._close, handle = heaps.ipc_heap(nbytes, dev, self._all_gather)
        else:
            heap, self._bases, self._close, handle = heaps.symm_mem_heap(nbytes, dev, dist.group.WORLD)
        heap[:RESERVED_BYTES].zero_()
        self._report = torch.zeros(devlib.REPORT_SLOTS, dtype=torch.int64, device=dev)
        state = np.zeros(devlib.STATE_SLOTS, dtype=np.int64)
        state[devlib.STATE_RANK], state[devlib.STATE_N_PES], state[devlib.STATE_HEAP_SIZE] = r, n, nbytes
        state[devlib.STATE_REPORT] = self._report.data_ptr()
        state[devlib.STATE_TIMEOUT_NS] = int(wait_timeout * 1e9)
        self._wait_timeout = wait_timeout
        state[devlib.STATE_BASES:devlib.STATE_BASES + n] = self._bases
        from . import loader
        loader.install(state)
        self._heap, self._handle = heap, handle
        self._alloc = HeapAllocator(nbytes)
        self._tensors = {}
        torch.cuda.synchronize()
        dist.barrier(group=self._cpu)

    def _need(self):
        if self._heap is None:
            raise TritonDistError("backend 'cuda' is not initialized: call triton_dist.init() first (ranks started "
                                  "by triton_dist.launch are initialized already)")

    def check(self):
        """Raise DeadlockError if a device-side wait of this rank gave up (synchronizes the GPU)."""
        if self._report is None:
            return
        values = self._report.tolist()
        if not values[0]:
            return
        from . import loader
        rec = devlib.decode_report(values, loader.module_names())
        raise DeadlockError(f"rank {self.rank()}: a device-side wait saw no progress for "
                            f"{self._wait_timeout:g} s and gave up", format_report(self.rank(), rec, self._bases,
                                                                                 self._alloc.size, self._tensors))

    def finalize(self):
        if self._heap is None:
            return
        import torch
        import torch.distributed as dist
        try:
            torch.cuda.synchronize()
            self.check()
        finally:
            torch.cuda.synchronize()
            self._close()
            self._heap = self._handle = None
            self._tensors.clear()
            if self._owns_group and dist.is_initialized():
                dist.destroy_process_group()
            self._owns_group = False

    def rank(self):
        import torch.distributed as dist
        self._need()
        return dist.get_rank()

    def world_size(self):
        import torch.distributed as dist
        self._need()
        return dist.get_world_size()

    def device(self):
        import torch
        self._need()            # before init no GPU is chosen (and CUDA must stay untouched)
        return torch.device("cuda", self._local_rank)

    def _all_gather(self, mine):
        import torch.distributed as dist
        values = [None] * dist.get_world_size()
        dist.all_gather_object(values, mine, group=self._cpu)
        return values

    def _agree(self, what, mine):
        require_agreement(what, self._all_gather(mine))

    def symm_tensor(self, shape, dtype):
        import torch
        self._need()
        shape, dtype = symm_shape_dtype(shape, dtype)
        self._agree("symm_tensor", ("symm_tensor", self._alloc.next_id, shape, str(dtype)))
        nbytes = symm_nbytes(shape, dtype)
        a = self._alloc.alloc(nbytes, f"symm tensor #{self._alloc.next_id} ({str(dtype)[6:]}{list(shape)})")
        t = self._heap[a.offset:a.offset + a.nbytes]
        t.zero_()
        self._tensors[a.offset] = a
        torch.cuda.synchronize()
        self.barrier()          # nobody writes into a peer's tensor before the peer has zeroed it
        return t[:nbytes].view(dtype).view(shape)

    def free(self, t):
        import torch
        self._need()
        if not isinstance(t, torch.Tensor):
            raise TritonDistError(f"free: expected a tensor from symm_tensor, got {type(t).__name__}")
        off = tensor_address(t) - self._heap.data_ptr()      # zero-size tensors too (data_ptr() is 0)
        a = self._tensors.get(off)
        if a is None:
            raise TritonDistError("free: this tensor was not returned by triton_dist.symm_tensor (or was freed "
                                  "already)")
        self._agree("free", ("free", a.aid))
        torch.cuda.synchronize()
        del self._tensors[off]
        self._alloc.release(off)

    def barrier(self):
        import torch
        import torch.distributed as dist
        self._need()
        torch.cuda.synchronize()
        self.check()
        dist.barrier(group=self._cpu)


def format_report(rank, rec, bases, heap_bytes, tensors) -> str:
    """One readable paragraph: rank, program, kernel line, what it waited in, address, values."""
    kind = devlib.KIND_NAMES.get(rec["kind"], f"kind {rec['kind']}")
    addr = rec["address"]
    where = f"0x{addr:x}"
    for pe in sorted(range(len(bases)), key=lambda p: p != rank):     # my own heap first
        off = addr - bases[pe]
        if not 0 <= off < heap_bytes:
            continue
        a = next((t for t in tensors.values() if t.offset <= off < t.offset + t.nbytes), None)
        if a is not None:
            where += f" ({a.label} on rank {pe}, byte {off - a.offset})"
        elif off < RESERVED_BYTES:
            where += f" (device-library state of rank {pe}, byte {off})"
        break
    line = f"line {rec['line']}" if rec["line"] else "line ?"
    text = f"rank {rank}, program {rec['program']}, kernel {rec['kernel']} {line}: {kind} at {where}"
    if rec["kind"] in (devlib.KIND_WAIT, devlib.KIND_SIGNAL_WAIT, devlib.KIND_BARRIER_PE, devlib.KIND_BARRIER_GRID):
        from triton_dist import symbols as S
        cmp = "== or +1" if rec["cmp"] == devlib.CMP_PLUS_ONE else S.CMP_NAMES.get(rec["cmp"], "?")
        text += f"; awaited value {cmp} {rec['awaited']}, saw {rec['seen']}"
        if rec["kind"] == devlib.KIND_BARRIER_GRID:
            text += (" (all programs of a kernel that calls barrier_all must run at once: use a grid no larger "
                     "than the GPU holds)")
    elif rec["kind"] == devlib.KIND_BAD_PE:
        text += f"; PE {rec['seen']} is not in 0..{rec['awaited'] - 1}"
    elif rec["kind"] == devlib.KIND_BAD_POINTER:
        text += "; pass a pointer into a tensor from triton_dist.symm_tensor"
    return text
