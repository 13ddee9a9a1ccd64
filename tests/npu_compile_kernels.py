"""Kernels that tests/test_npu_compile.py and benchmarks/npu_compile.py hand to the real NPU compilers.

Module-level, so `triton-dist npu-compile tests/npu_compile_kernels.py::NAME` reaches them too.
One kernel per group of distributed ops of triton_dist/symbols.py (OPS says which op is where;
the ids and the RMA ops are tests/hivm_forms.py's kernels); barrier_all has a kernel of its own
(with the result of another op stored, a compiler crash in vector-only kernels, docs/ascend.md).
"""
import triton
import triton.language as tl

import hivm_forms as H
import triton_dist.language as dl
from triton.language.extra.cann.extension import sub_vec_id  # triton-ascend's, or the simulator's (sim/compat/cann.py)
from triton_dist.language.extra import libshmem_device as shm


@triton.jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def put_to_peer(src, buf, sig, peer, BLOCK: tl.constexpr):
    """A tile to the peer's symmetric buffer, fence, notify; wait for ours, consume the token, use it."""
    offs = tl.arange(0, BLOCK)
    remote = dl.symm_at(buf, peer)
    tl.store(remote + offs, tl.load(src + offs))
    shm.fence()
    dl.notify(sig, peer, signal=1, sig_op="set")
    tok = dl.wait(sig, 1, "gpu", "acquire", waitValue=1)
    mine = dl.consume_token(buf, tok)
    tl.store(src + offs, tl.load(mine + offs) * 2)


@triton.jit
def dot_fp16(a, b, c, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    rk = tl.arange(0, K)
    x = tl.load(a + rm * K + rk[None, :])
    y = tl.load(b + rk[:, None] * N + rn)
    tl.store(c + rm * N + rn, tl.dot(x, y).to(tl.float16))


@triton.jit
def ops_pointers(p, peer, x, y, DOT: tl.constexpr):
    H._dot(x, y, DOT)
    tl.store(dl.symm_at(p, peer) + tl.arange(0, 8), tl.load(p + tl.arange(0, 8)))
    tl.store(shm.remote_ptr(p + 1, peer), tl.load(p))


@triton.jit
def ops_signals(sig, sig64, out, peer, x, y, DOT: tl.constexpr):
    H._dot(x, y, DOT)
    dl.notify(sig, peer, signal=1, sig_op="add")
    dl.notify(sig64, peer, signal=1, sig_op="set")
    tok = dl.wait(sig + 16, 2, "sys", "acquire", waitValue=3)
    tok64 = dl.wait(sig64 + 8, 1, "sys", "acquire", waitValue=3)
    v = dl.consume_token(tl.load(out), tok)           # a scalar
    p = dl.consume_token(out + 4, tok64)              # a pointer
    tl.store(p, v)


@triton.jit
def ops_sync(sig, sig64, peer, x, y, DOT: tl.constexpr):
    """hivm_forms.f_sync without barrier_all (which has a kernel of its own, ops_barrier_all)."""
    H._dot(x, y, DOT)
    shm.int_p(sig, 1, peer)
    shm.int64_p(sig64, 1, peer)
    shm.signal_op(sig, 1, shm.ACLSHMEM_SIGNAL_ADD, peer)
    v = shm.signal_wait_until(sig, shm.ACLSHMEM_CMP_GE, 1)
    shm.quiet()
    shm.fence()
    shm.barrier_all_vec()
    shm.barrier(shm.ACLSHMEM_TEAM_WORLD)
    shm.barrier_vec(shm.ACLSHMEM_TEAM_WORLD)
    tl.store(sig + 16, v)


@triton.jit
def ops_barrier_all(out, x, y, DOT: tl.constexpr):
    H._dot(x, y, DOT)
    shm.barrier_all()
    tl.store(out, 1)


@triton.jit
def consume_a_tile_of_pointers(sig, buf):
    tok = dl.wait(sig, 1, "sys", "acquire")
    p = dl.consume_token(buf + tl.arange(0, 4), tok)
    tl.store(buf + 8 + tl.arange(0, 4), tl.load(p))


@triton.jit
def on_sub_core_0(ptr):
    """As upstream's Ascend tests write it: only vector sub-core 0 of each block adds its rank."""
    pid = tl.program_id(0)
    if sub_vec_id() == 0:
        tl.store(ptr + pid, tl.load(ptr + pid) + dl.rank())


DOT_SIG = {"x": "*fp32", "y": "*fp32"}
# kernel -> its signature (with the dot's operands) and the dl / libshmem_device ops it calls
OPS = {
    H.f_ids: ({"out": "*i32"}, ("rank", "num_ranks", "my_pe", "n_pes", "team_my_pe", "team_n_pes",
                                "team_translate_pe")),
    ops_pointers: ({"p": "*fp32", "peer": "i32"}, ("symm_at", "remote_ptr")),
    ops_signals: ({"sig": "*i32", "sig64": "*i64", "out": "*i32", "peer": "i32"}, ("notify", "wait", "consume_token")),
    H.f_rma: ({"a": "*fp16", "b": "*fp16", "sig": "*i32", "peer": "i32"},
              ("putmem", "getmem", "putmem_nbi", "getmem_nbi", "putmem_signal", "putmem_signal_nbi")),
    ops_sync: ({"sig": "*i32", "sig64": "*i64", "peer": "i32"},
               ("int_p", "int64_p", "signal_op", "signal_wait_until", "quiet", "fence", "barrier_all_vec", "barrier",
                "barrier_vec")),
    ops_barrier_all: ({"out": "*i32"}, ("barrier_all",)),
}
