"""The device side of triton-ascend's extension ops (triton.language.extra.cann.extension) on
the simulator: builder methods, with the names and arguments triton-ascend's interpreter
builder has (python/triton/runtime/ascend_interpreter.py at triton-lang/triton-ascend
a84b1eb5, cited per op), so that one frontend call reaches them whichever frontend is live:
triton-ascend's own extension on its main line (sim/tritonapi/ascend.py routes the first
group below onto its AscendInterpreterBuilder), the simulator's (sim/compat/cann.py) on stock
triton (sim/tritonapi/g36.py installs all of them onto the InterpreterBuilder).

Models of the machine (not what a sequential interpreter does):
- create_get_sub_vec_id: the sub-core instance's own id; a block of a mix kernel that names
  sub_vec_id runs as two concurrent instances (sim/runtime.py), not as a second run of the
  grid afterwards (AscendInterpreterBuilder.execute_with_sub_vec_simulation :188);
- sync_block_all: a barrier of the launch's cores (sim/runtime.py core_barrier, with its
  deadlock report): all of them, their cube or their vector instances, or ("all_sub_vector")
  the vector sub-cores of each block;
- sync_block_set / sync_block_wait: a cube<->vector flag is a counter (set adds one, wait
  takes one: Ascend C CrossCoreSetFlag/CrossCoreWaitFlag); a kernel that names them runs each
  block as concurrent cube and vector instances (sim/core_split.py), the set on the sender's,
  the wait, a blocking scheduling point, on the receiver's, with deadlock and unpaired-flag
  reports;
- the ops that read or write global memory (gather_out_to_ub, scatter_ub_to_out, index_put,
  index_select_simd) go through the access path (sim/access.py) like tl.load/tl.store
  (caches, DMA order, the race detector, the bounds of the tensor the pointer came from).
Results of the data ops follow triton-ascend's interpreter (the line cited on each).
"""
from __future__ import annotations

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle, _get_np_dtype

from triton_dist.errors import TritonDistError

from . import access, context, core_split, memory, primitives
from .tile_slices import int_of

SYNC_MODES = ("all_cube", "all_vector", "all", "all_sub_vector")




def _core(what):
    c = context.core()
    if c is None:
        raise TritonDistError(f"{what} is a device builtin: call it inside a @triton.jit kernel")
    return c


# --- routed on triton-ascend's main line too ------------------------------------------------------

def create_get_sub_vec_id(self):
    """ascend_interpreter.py :429 (int64 scalar)."""
    c = _core("sub_vec_id()")
    return TensorHandle(np.array([int(getattr(c, "sub_vec", 0) or 0)], dtype=np.int64), tl.int64)


def sync_block_all(self, mode, event_id):
    """ascend_interpreter.py :481 (a no-op there)."""
    mode = mode.value if isinstance(mode, tl.constexpr) else mode
    where = context.kernel_line(3)
    if mode not in SYNC_MODES:
        raise TritonDistError(f"{where}: sync_block_all: mode must be one of {', '.join(SYNC_MODES)}, got {mode!r}")
    c = _core("sync_block_all")
    rt = context.runtime()
    s = c.split
    if mode == "all_sub_vector":
        _sync_sub_vectors(c, rt, event_id)
        return
    launch = c.launch
    looped = launch is not None and launch.looped
    if s is None:
        # blocks beyond the cores never reach it while the resident ones wait in it: the deadlock
        # report (sim/board.py coresidency) reads "sync_block_all" in the target (sim/grid_limits.py)
        _drain_pipes(c, rt)
        if looped:          # the hardware barrier counts the blocks launched: one per core (inferred)
            rt.core_barrier(c, parties=launch.ncores, what=(
                f"the {launch.ncores} cores launched of rank {rt.rank} (sync_block_all({mode!r}); "
                f"TRITON_ALL_BLOCKS_PARALLEL=1: one block per core)"))
        else:
            rt.core_barrier(c, what=f"the {c.ncores} cores of rank {rt.rank} (sync_block_all({mode!r}))")
        return
    # split blocks under TRITON_ALL_BLOCKS_PARALLEL=1 still meet as every block of the grid: not modelled
    nblocks = c.grid_dim[0] * c.grid_dim[1] * c.grid_dim[2]
    if mode == "all":                   # every core of every block: its cube and vector instances
        _drain_pipes(c, rt)
        rt.core_barrier(c, what=f"the {c.ncores} cores of the {nblocks} blocks of rank {rt.rank} (each block its cube "
                                f"core and {s.block.nvec} vector core{'s' if s.block.nvec > 1 else ''}; "
                                f"sync_block_all('all'))")
        return
    kind = core_split.CUBE if mode == "all_cube" else core_split.VECTOR
    if s.core_type != kind:             # a barrier of the other kind's cores
        return
    _drain_pipes(c, rt)
    parties = nblocks * (1 if kind == core_split.CUBE else s.block.nvec)
    rt.core_barrier(c, mode, parties, f"the {parties} {kind} cores of rank {rt.rank} (sync_block_all({mode!r}))")


def _sync_block_all_primitive(rt, mode, event_id):
    """sync_block_all as a device-library call, for a kernel backend that runs the compiled kernel
    (backend hivm: the module's INTER_BLOCK_SYNCHRONIZATION set/wait pair), which reaches the
    simulator through triton_dist.backend's device_call only: the same barrier as above."""
    sync_block_all(None, mode, event_id)


primitives.primitive("sync_block_all")(_sync_block_all_primitive)


def _drain_pipes(c, rt) -> None:
    """Every mode of sync_block_all starts with a barrier of the participating core's pipes:
    triton-ascend gives the core's side PIPE_ALL (third_party/ascend/ascend_ir.cc:138-166 at
    triton-lang/triton-ascend a84b1eb5) and AscendNPU-IR lowers the op to
    hivm.pipe_barrier[that pipe] before the cross-core flags (HIVMDecomposeOp.cpp:461-465, 541,
    568, 596 at Ascend/AscendNPU-IR 52f96a13): its stores in flight complete, as at
    tl.debug_barrier (sim/interp.py), before the other cores are met."""
    from . import primitives
    primitives.complete_pending(c)
    if rt.observers is not None:
        rt.observers.quiet()


def _sync_sub_vectors(c, rt, event_id) -> None:
    """sync_block_all("all_sub_vector"): a barrier of the vector sub-cores of the caller's block
    only.  triton-ascend emits hivm.hir.sync_block[ALL_SUB_VECTOR] with a vector pipe only
    (third_party/ascend/ascend_ir.cc:158-161 at triton-lang/triton-ascend a84b1eb5); AscendNPU-IR
    lowers it like ALL_VECTOR but with INTER_SUBBLOCK_SYNCHRONIZATION instead of
    INTER_BLOCK_SYNCHRONIZATION (bishengir/lib/Dialect/HIVM/Transforms/HIVMDecomposeOp.cpp:580-603,
    HIVMSynchronizationOps.td:98 "All sub vector are synchronized to a same point", at
    Ascend/AscendNPU-IR 52f96a13).  That the sub-block scope is the block's own vector cores (its
    two AIVs on A2/A3, as Ascend C's intra-group cross-core flag mode) is inferred, not verified.
    The cube core does not take part; a block running one vector instance waits for nobody."""
    s = c.split
    if s is not None and s.core_type != core_split.VECTOR:
        return
    _drain_pipes(c, rt)
    parties = s.block.nvec if s is not None else max(1, int(getattr(c, "sub_blocks", 1) or 1))
    if parties == 1:
        return
    block = tuple(c.grid_idx)
    rt.core_barrier(c, ("all_sub_vector", block, event_id), parties,
                    f"the {parties} vector sub-cores of block {block} of rank {rt.rank} "
                    f"(sync_block_all('all_sub_vector', {event_id}))")


def _flag_args(what, sender, receiver, event_id):
    c = _core(what)
    sender, receiver = str(sender), str(receiver)
    if c.split is None:
        raise TritonDistError(
            f"{context.kernel_line(4)}: {what}({sender!r}, {receiver!r}, {int_of(event_id)}) in a kernel the simulator "
            f"did not see naming sync_block_set/sync_block_wait (it looks for the names in the kernel and the @jit "
            f"helpers among its globals), so its block runs as one instance: call it from the kernel or such a helper")
    return c, sender, receiver, int_of(event_id)


def sync_block_set(self, sender, receiver, event_id, sender_pipe_value=None, receiver_pipe_value=None):
    """ascend_interpreter.py :449 (a no-op there): on the sender's core of the block (sim/core_split.py)."""
    c, sender, receiver, event = _flag_args("sync_block_set", sender, receiver, event_id)
    core_split.block_set(c, sender, receiver, event, context.kernel_line(3))


def sync_block_wait(self, sender, receiver, event_id, sender_pipe_value=None, receiver_pipe_value=None):
    """ascend_interpreter.py :465 (a no-op there): blocks the receiver's core of the block until a set."""
    c, sender, receiver, event = _flag_args("sync_block_wait", sender, receiver, event_id)
    core_split.block_wait(c, sender, receiver, event, context.kernel_line(3))


def _ptr_base(h):
    return h.attr.get("td_base") or memory.base_of(np.asarray(h.data))


def _coords(shape):
    return np.indices(shape).reshape(len(shape), -1)


def _indexed_addresses(ptr, index_tensor, index_boundary, dim, strides, start_offset):
    """Element c of the index tile addresses ptr[start + c, with c[dim] -> index[c]]; (addresses,
    valid, numpy dtype), an index at or above index_boundary invalid (its address: ptr's own)."""
    dtype_np = _get_np_dtype(ptr.get_element_ty())
    index = np.asarray(index_tensor.data)
    stride = np.array([int_of(s) for s in strides], dtype=np.int64)
    start = np.array([int_of(s) for s in start_offset], dtype=np.int64)
    co = _coords(index.shape).astype(np.int64)
    flat_idx = index.reshape(-1).astype(np.int64)
    valid = flat_idx < int_of(index_boundary)
    co[dim] = flat_idx
    elem = ((co + start[:, None]) * stride[:, None]).sum(axis=0)
    base_addr = int(np.asarray(ptr.data).ravel()[0])
    addrs = np.where(valid, base_addr + elem * np.dtype(dtype_np).itemsize, base_addr).astype(np.uint64)
    return addrs, valid, dtype_np


def create_gather_out_to_ub(self, src_ptr, index_tensor, index_boundary, dim, src_stride, end_offset,
                            start_offset, other=None):
    """ascend_interpreter.py :531: out[c] = src[start + c with c[dim] -> index[c]]; indices at or
    above index_boundary give `other` (0 if none)."""
    addrs, valid, dtype_np = _indexed_addresses(src_ptr, index_tensor, index_boundary, dim, src_stride, start_offset)
    fill = 0 if other is None else (np.asarray(other.data).ravel()[0] if isinstance(other, TensorHandle) else other)
    out = access.load(addrs, valid, np.full(addrs.shape, fill, dtype=dtype_np), dtype_np, False, _ptr_base(src_ptr))
    return TensorHandle(np.asarray(out).reshape(np.asarray(index_tensor.data).shape), src_ptr.get_element_ty())


def create_scatter_ub_to_out(self, dst_ptr, value_tensor, index_tensor, index_boundary, dim, dst_stride,
                             end_offset, start_offset):
    """ascend_interpreter.py :589: dst[start + c with c[dim] -> index[c]] = value[c]; indices at or
    above index_boundary are skipped."""
    addrs, valid, dtype_np = _indexed_addresses(dst_ptr, index_tensor, index_boundary, dim, dst_stride, start_offset)
    values = np.asarray(value_tensor.data).astype(dtype_np).reshape(-1)
    access.store(addrs, values, valid, False, _ptr_base(dst_ptr))


def create_index_put(self, dst_ptr, index_tensor, value_tensor, dim, index_boundary, end_offset, start_offset,
                     dst_stride):
    """ascend_interpreter.py :631: for each element c of value, dst[c with c[dim] -> index[c[dim]],
    the other dims + start_offset] = value[c]; index values at or above index_boundary are skipped."""
    dtype_np = _get_np_dtype(dst_ptr.get_element_ty())
    value = np.asarray(value_tensor.data)
    index = np.asarray(index_tensor.data).reshape(-1).astype(np.int64)
    stride = np.array([int_of(s) for s in dst_stride], dtype=np.int64)
    start = np.array([int_of(s) for s in start_offset], dtype=np.int64)
    co = _coords(value.shape).astype(np.int64)
    picked = index[co[dim]]
    valid = picked < int_of(index_boundary)
    co = co + start[:, None]
    co[dim] = picked                        # the indexed dim takes the index itself, no start offset
    elem = (co * stride[:, None]).sum(axis=0)
    base_addr = int(np.asarray(dst_ptr.data).ravel()[0])
    addrs = np.where(valid, base_addr + elem * np.dtype(dtype_np).itemsize, base_addr).astype(np.uint64)
    access.store(addrs, value.astype(dtype_np).reshape(-1), valid, False, _ptr_base(dst_ptr))


def create_index_select_simd(self, src_ptr, index_tensor, dim, src_shape, src_offset, read_shape, result_shape):
    """ascend_interpreter.py :335: result[..., i (at dim), ...] = the tile of src (row-major
    src_shape) at index[i] along dim, starting at src_offset and read_shape long in the other
    dims (-1: from 0 / the whole dim; a tile running past src_shape is cut there, the rest of
    the result is 0)."""
    dtype_tt = src_ptr.get_element_ty()
    dtype_np = _get_np_dtype(dtype_tt)
    shape = [int_of(s) for s in src_shape]
    result = [int_of(s) for s in result_shape]
    strides = np.cumprod([1] + shape[::-1][:-1])[::-1].astype(np.int64)
    index = np.asarray(index_tensor.data).reshape(-1).astype(np.int64)
    ranges, tile = [], []
    for d, n in enumerate(shape):
        if d == dim:
            ranges.append(None)
            tile.append(1)
            continue
        off = int_of(src_offset[d])
        off = 0 if off == -1 else max(0, min(off, n - 1))
        size = int_of(read_shape[d])
        size = n if size == -1 else size
        size = min(size, n - off)
        ranges.append(np.arange(off, off + size))
        tile.append(size)
    out = np.zeros(result, dtype=dtype_np)
    base_addr = int(np.asarray(src_ptr.data).ravel()[0])
    for i, row in enumerate(index):
        axes = [np.array([row]) if r is None else r for r in ranges]
        grid = np.meshgrid(*axes, indexing="ij")
        elem = sum(g.astype(np.int64) * s for g, s in zip(grid, strides)).reshape(-1)
        addrs = (base_addr + elem * np.dtype(dtype_np).itemsize).astype(np.uint64)
        data = access.load(addrs, np.ones(addrs.shape, dtype=bool), np.zeros(addrs.shape, dtype=dtype_np), dtype_np,
                           False, _ptr_base(src_ptr))
        where = tuple(slice(i, i + 1) if d == dim else slice(0, t) for d, t in enumerate(tile))
        out[where] = np.asarray(data).reshape(tile)
    return TensorHandle(out, dtype_tt)


ROUTED = ("create_get_sub_vec_id", "sync_block_set", "sync_block_wait", "sync_block_all",
          "create_gather_out_to_ub", "create_scatter_ub_to_out", "create_index_put", "create_index_select_simd")


# --- value-only ops: the simulator's versions, for stock triton (triton-ascend's own serve there) ------

def _offsets(offsets):
    return [int_of(o) for o in offsets]


# slices and element reads, bounds-checked (sim/tile_slices.py)
from .tile_slices import create_extract_scalar, create_extract_slice, create_insert_slice  # noqa: E402,F401


def _dim(dim, ndim):
    d = dim + ndim if dim < 0 else dim
    if not 0 <= d < ndim:
        raise IndexError(f"Dimension out of range(expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})")
    return d


def create_sort(self, x, dim, descending):
    """ascend_interpreter.py create_sort: numpy's sort along dim, flipped for descending.  bf16 and
    float8 (raw bits here) are ordered by value by sim/low_precision.py's wrapper of this method."""
    data = np.asarray(x.data)
    out = np.sort(data, axis=_dim(dim, data.ndim))
    return TensorHandle(np.flip(out, axis=_dim(dim, data.ndim)).copy() if descending else out, x.dtype.scalar)


def create_flip(self, x, dim):
    """ascend_interpreter.py create_flip."""
    data = np.asarray(x.data)
    return TensorHandle(np.flip(data, axis=_dim(dim, data.ndim)).copy(), x.dtype.scalar)


VALUE_OPS = ("create_extract_scalar", "create_insert_slice", "create_extract_slice", "create_sort", "create_flip")

