"""What every kernel of the library shares: input checks, symmetric workspaces, epochs.

Workspaces
----------
Collective allocation is costly (it is a host collective plus a barrier), so each op keeps
one *workspace* of symmetric memory and reuses it across calls: a byte buffer for data and
an int32 buffer of signal slots (one slot = 64 bytes = 16 int32, the Ascend cache line, so
no two signals ever share a line).  Both are split into two *phases*; call number `e` (the
op's *epoch*, counted identically on every rank since calls are collective) uses phase
`e % 2`.  A workspace only grows, when a call needs more than any call before;
`free_workspaces()` gives everything back.

Why two phases and epochs are enough (no reset between calls)
-------------------------------------------------------------
- Producers SET a slot to the epoch of the call; consumers `dl.wait` for equality with it.
  A stale slot holds an older epoch, so it can never release a consumer early, whatever any
  cache holds (SET stores + dcci the slot's own line; waits dcci every round).
- A peer may already be one call ahead: it can write call e+1 into this rank while this
  rank still reads call e.  Call e+1 uses the other phase, so nothing is overwritten, and a
  slot of call e is never overwritten before its consumer has seen it (an equality wait
  would otherwise miss it and hang).
- A peer can never be two calls ahead: in every op of the library, finishing a call needs
  data that every other rank sent in that same call (directly, or through the ring), and a
  rank sends call e+1 only after its kernel of call e has ended, reads included.  So when
  a peer writes phase e % 2 again (call e+2), this rank is done with call e.
- Epochs live in int32 slots; after EPOCH_MAX calls the workspace re-synchronizes once:
  host barrier (every kernel of every rank has ended), zero the signals, host barrier,
  start again at epoch 1.

"""
from __future__ import annotations

import torch

import triton_dist
from triton_dist import backend as _backend
from triton_dist.errors import TritonDistError

SLOT = 16                    # int32 elements per signal slot (64 bytes)
GRANULE = 64 * 1024          # workspace data sizes are multiples of this (keeps phases 512-byte aligned)
EPOCH_MAX = 2 ** 30          # epochs run 1..EPOCH_MAX, then the workspace re-synchronizes
INT32_LIMIT = 2 ** 31 - 1

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# Triton specializes an int argument equal to 1 or divisible by 16; the epoch changes every
# call, so without this a kernel is compiled three times, the third when the epoch first
# reaches a multiple of 16, in the middle of a run (on the GPU: 5-call means of 150-440 ms
# instead of ~7 ms, i.e. one ~2 s GEMM compile, in bench_cuda.py's sweeps).
ONE_COMPILE_FOR_EVERY_EPOCH = dict(do_not_specialize=["epoch"])


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


# ---- input checks ----------------------------------------------------------------------------

def check_tensor(op: str, name: str, t, min_dim: int = 0, ndim: int | None = None) -> torch.Tensor:
    """A contiguous tensor of a supported dtype on triton_dist.device(), or a TritonDistError."""
    if not isinstance(t, torch.Tensor):
        raise TritonDistError(f"kernels.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in DTYPES:
        raise TritonDistError(
            f"kernels.{op}: {name} has dtype {t.dtype}, which is not supported; use torch.float32, "
            f"torch.float16 or torch.bfloat16 (convert with {name}.to(torch.float32))")
    if ndim is not None and t.dim() != ndim:
        raise TritonDistError(f"kernels.{op}: {name} must have exactly {ndim} dimensions, got shape "
                              f"{tuple(t.shape)}")
    if t.dim() < min_dim:
        raise TritonDistError(f"kernels.{op}: {name} must have at least {min_dim} dimension(s), got shape "
                              f"{tuple(t.shape)}; reshape it (e.g. {name}.reshape(1, -1))")
    dev = torch.device(triton_dist.device())
    if t.device.type != dev.type or (dev.index is not None and t.device.index not in (None, dev.index)):
        raise TritonDistError(f"kernels.{op}: {name} is on {t.device}, but this rank's device is {dev}; "
                              f"move it with {name}.to(triton_dist.device())")
    return t.contiguous()


def check_rows_divisible(op: str, name: str, rows: int, n: int) -> int:
    if rows % n:
        raise TritonDistError(
            f"kernels.{op}: dim 0 of {name} ({rows}) must be a multiple of the world size ({n}), since "
            f"every rank gets dim0 / world_size rows; pad {name} to {cdiv(rows, n) * n} rows")
    return rows // n


def check_size(op: str, elements: int, element_size: int) -> None:
    if elements * element_size > INT32_LIMIT:
        raise TritonDistError(f"kernels.{op}: {elements} elements of {element_size} bytes exceed the 2 GiB that "
                              f"32-bit kernel offsets and transfer sizes can address; split the call into "
                              f"smaller ones")


def check_block(op: str, name: str, v: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1 or v & (v - 1) or v > 256:
        raise TritonDistError(f"kernels.{op}: {name} must be a power of two in 1..256 (16 or more on an NPU), "
                              f"got {v!r}")
    return v


def check_launches(op: str, launches) -> int:
    if launches not in (1, 2):
        raise TritonDistError(f"kernels.{op}: launches must be 1 (producer and consumer programs in one "
                              f"launch) or 2 (a producer launch, then a consumer launch), got {launches!r}")
    return launches


def world() -> tuple[int, int]:
    return triton_dist.rank(), triton_dist.world_size()


class Profile:
    """How the library sizes its launches on the active backend.

    The simulator and the NPU: few program instances (an NPU has 20-24 AI cores; the
    simulator pays per instance) and small GEMM tiles.  CUDA: one program per SM for the
    element-wise collectives, and GEMM tiles and pipelining that keep Hopper's tensor cores
    fed (128x256x64 half-precision tiles, 8 warps, 4 stages; fp32 multiplies in full
    precision, with smaller tiles that fit shared memory)."""

    def __init__(self):
        self.cuda = _backend.active().name == "cuda"
        if self.cuda:
            props = torch.cuda.get_device_properties(torch.device(triton_dist.device()))
            self.sms = props.multi_processor_count
        else:
            self.sms = 0
        # GEMM tiles in groups of 8 tile rows on a GPU (B columns stay in L2 while 8 rows of
        # tiles use them); row-major elsewhere
        self.group_m = 8 if self.cuda else 1

    def parts(self, default_max: int, default_min: int) -> tuple[int, int]:
        """(most, fewest elements per) program instances of an element-wise collective."""
        return (self.sms, 16 * 1024) if self.cuda else (default_max, default_min)

    def programs(self, producers: int, consumers: int, heavy: str, K: int = 0) -> tuple[int, int]:
        """Producer and consumer program counts of a GEMM op; `heavy` is the role that runs the GEMM."""
        if not self.cuda:
            return producers, consumers
        # The light role (pushing A tiles / reducing finished tiles) gets 8 SMs, the GEMM the
        # rest; alone on one GPU nothing is pushed, so AG+GEMM's GEMM gets every SM.  GEMM+RS's
        # reduction costs the same per output tile whatever K is, while the GEMM's time grows
        # with K: below K = 8192 it gets 16 SMs (2 x H200, M=8192 N=28672: 16 reducers beat 8
        # by 25% at K=4096, 8 beat 16 by 4% at K=8192; bench_cuda.py --sweep rs).
        if heavy == "consumer":
            light = 8
            return (light, self.sms - light if triton_dist.world_size() > 1 else self.sms)
        light = 8 if K >= 8192 else 16
        return (self.sms - light, light)

    def gemm(self, dtype) -> tuple[tuple[int, int, int], dict]:
        """Default (BLOCK_M, BLOCK_N, BLOCK_K) and launch options of the GEMM ops."""
        if not self.cuda:
            return (32, 32, 32), {}
        if dtype == torch.float32:
            return (64, 64, 32), dict(num_warps=4, num_stages=3)
        # measured on 2 x H200 (benchmarks/bench_cuda.py --sweep, M=8192 N=28672 K=8192): 4 stages
        # beat 3 by 11% (AG+GEMM) and 9% (GEMM+RS); 128x128 and 256x128 tiles were slower
        return (128, 256, 64), dict(num_warps=8, num_stages=4)


_profiles: dict = {}


def profile() -> Profile:
    """The profile of this process's backend and device (measured once)."""
    key = (_backend.active().name, str(triton_dist.device()) if _backend.active().name == "cuda" else "")
    if key not in _profiles:
        _profiles[key] = Profile()
    return _profiles[key]


def dot_precision(dtype) -> str:
    """tl.dot input precision: fp32 inputs are multiplied in full fp32 (as the simulator and the
    reference do), not rounded to tf32 as a GPU would by default."""
    return "ieee" if dtype == torch.float32 else "tf32"


def dot_upcast(dtype) -> bool:
    """Triton's interpreter multiplies bf16 operands of tl.dot as raw uint16 bit patterns
    (triton/runtime/interpreter.py, InterpreterBuilder.create_dot), so on the simulator bf16
    tiles are converted to fp32 before tl.dot.  An NPU multiplies bf16 natively."""
    return dtype == torch.bfloat16 and _backend.active().interprets_kernels


# ---- workspaces -------------------------------------------------------------------------------

def _session():
    """The object that identifies this rank's current triton_dist session (a new one after
    finalize() + init(), whose heaps are new: old workspaces must not be used or freed)."""
    be = _backend.active()
    for attr in ("rt", "_ash"):
        s = getattr(be, attr, None)
        if s is not None:
            return s
    return be


class Phase:
    """The half of a workspace that one call uses."""
    __slots__ = ("data", "sig", "epoch")

    def __init__(self, data, sig, epoch):
        self.data, self.sig, self.epoch = data, sig, epoch

    def view(self, dtype, offset_elems: int, numel: int) -> torch.Tensor:
        """`numel` elements of `dtype` starting `offset_elems` elements into this phase's data."""
        es = torch.empty((), dtype=dtype).element_size()
        lo = offset_elems * es
        return self.data[lo:lo + numel * es].view(dtype)


class Workspace:
    def __init__(self, name: str):
        self.name = name
        self.data = None        # uint8 symmetric tensor: 2 phases of data_cap bytes
        self.sig = None         # int32 symmetric tensor: 2 phases of sig_cap slots
        self.data_cap = 0
        self.sig_cap = 0
        self.epoch = 0

    def _grow(self, data_bytes: int, sig_slots: int) -> None:
        # exactly what is needed (64 KiB granules): a workspace is reallocated only when a
        # call needs more than any call before
        data_cap = max(self.data_cap, _round_up(max(data_bytes, 1), GRANULE))
        sig_cap = max(self.sig_cap, _round_up(max(sig_slots, 1), 64))
        self.free()
        try:
            self.data = triton_dist.symm_tensor((2 * data_cap,), torch.uint8)
            self.sig = triton_dist.symm_tensor((2 * sig_cap * SLOT,), torch.int32)
        except MemoryError as e:
            self.free()
            raise TritonDistError(
                f"kernels.{self.name}: no room on the symmetric heap for its workspace (2 x {data_cap} bytes "
                f"of data and 2 x {sig_cap} signal slots): {e}. Call triton_dist.kernels.free_workspaces() "
                f"to give back the other ops' workspaces, free symmetric tensors you no longer need, or "
                f"raise TRITON_DIST_HEAP_SIZE") from None
        self.data_cap, self.sig_cap = data_cap, sig_cap
        self.epoch = 0          # fresh slots are zero (symm_tensor zero-fills, then barriers)

    def _resync(self) -> None:
        _device_sync()
        triton_dist.barrier()   # every kernel of every rank using these slots has ended
        self.sig.zero_()
        _device_sync()
        triton_dist.barrier()   # nobody signals this rank again before its slots are zero
        self.epoch = 0

    def acquire(self, data_bytes: int, sig_slots: int) -> Phase:
        """The phase for the next call, with at least data_bytes of data and sig_slots slots."""
        if self.data is None or data_bytes > self.data_cap or sig_slots > self.sig_cap:
            self._grow(data_bytes, sig_slots)
        if self.epoch >= EPOCH_MAX:
            self._resync()
        self.epoch += 1
        p = self.epoch % 2
        data = self.data[p * self.data_cap:(p + 1) * self.data_cap]
        sig = self.sig[p * self.sig_cap * SLOT:(p + 1) * self.sig_cap * SLOT]
        return Phase(data, sig, self.epoch)

    def free(self) -> None:
        if self.sig is not None:
            triton_dist.free(self.sig)
        if self.data is not None:
            triton_dist.free(self.data)
        self.data = self.sig = None
        self.data_cap = self.sig_cap = 0


def _device_sync():
    dev = torch.device(triton_dist.device())
    mod = getattr(torch, dev.type, None)
    if dev.type != "cpu" and mod is not None and hasattr(mod, "synchronize"):
        mod.synchronize()


_cache = {"session": None, "spaces": {}}


def workspace(name: str) -> Workspace:
    s = _session()
    if _cache["session"] is not s:
        # a new session: the old heaps are gone, so the old workspaces are simply dropped
        _cache["session"] = s
        _cache["spaces"] = {}
    ws = _cache["spaces"].get(name)
    if ws is None:
        ws = _cache["spaces"][name] = Workspace(name)
    return ws


def free_workspaces() -> None:
    """Collective: give back the symmetric memory the kernel library keeps between calls."""
    if _cache["session"] is not _session():
        _cache["session"], _cache["spaces"] = None, {}
        return
    for name in sorted(_cache["spaces"]):
        _cache["spaces"][name].free()
    _cache["spaces"] = {}


def workspace_bytes() -> int:
    """Symmetric bytes this rank's kernel library holds now (for tests and benchmarks)."""
    if _cache["session"] is not _session():
        return 0
    return sum(ws.data.numel() + ws.sig.numel() * 4 for ws in _cache["spaces"].values() if ws.data is not None)
