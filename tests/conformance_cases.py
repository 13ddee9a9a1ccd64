"""One small program per feature family of Triton's test_core.py (triton 3.6.0,
python/test/unit/language/test_core.py), run both by Triton's plain interpreter (a subprocess
without triton_dist: the outside oracle) and inside a simulated rank
(tests/test_conformance.py compares the two).  This module imports no triton_dist, so the
plain run is Triton's alone.

Each case is a function returning what the program produced (lists of numbers, printed
lines) as JSON-able data; `outcome(name)` runs one and, if it raises, returns what was raised
(type, whether it is a triton.TritonError, the type of its __cause__, the first line of its
text).  Families (test_core.py's test functions each case stands for, in brackets):
dtypes and casts [test_cast, test_bitcast], binary/unary ops [test_bin_op, test_unary_op,
test_math_op, test_where], reductions and scans [test_reduce1d, test_scan2d, test_argmin_argmax,
test_histogram], atomics [test_atomic_rmw, test_atomic_cas (the spin lock)], dots [test_dot],
block pointers [test_block_pointer (test_block_pointer.py)], tensor descriptors
[test_tensor_descriptor (host TensorDescriptor)], tuples [test_tuple.py, tuple arguments],
constexpr and static_range [test_constexpr, test_static_range], printing and asserts
[test_print, test_device_assert], program ids [test_program_id], errors raised
[test_scalar_overflow, test_arange errors].
"""
import contextlib
import io

import numpy as np
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _l(t):
    return t.tolist()


# ---- dtypes and casts ----------------------------------------------------------------------

@triton.jit
def _cast_kernel(x, o8, ou8, o16, o32f, o64, of16, obf16, N: tl.constexpr):
    i = tl.arange(0, N)
    v = tl.load(x + i)
    tl.store(o8 + i, v.to(tl.int8))
    tl.store(ou8 + i, v.to(tl.uint8))
    tl.store(o16 + i, v.to(tl.int16))
    tl.store(o32f + i, v.to(tl.int32).to(tl.float32))
    tl.store(o64 + i, v.to(tl.int64))
    tl.store(of16 + i, v.to(tl.float16))
    tl.store(obf16 + i, v.to(tl.bfloat16).to(tl.float32))


CAST_INPUTS = [-3.7, -1.5, 0.0, 0.49, 1.5, 100.25, 127.9, 65504.0]


@case
def casts():
    x = torch.tensor(CAST_INPUTS, dtype=torch.float32)
    outs = [torch.zeros(8, dtype=d) for d in (torch.int8, torch.uint8, torch.int16, torch.float32, torch.int64,
                                               torch.float16, torch.float32)]
    _cast_kernel[(1,)](x, *outs, N=8)
    return [_l(o) for o in outs[:1] + outs[2:]]      # uint8 of negatives is implementation-defined


@triton.jit
def _bitcast_kernel(x, o, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(o + i, tl.load(x + i).to(tl.int32, bitcast=True))


@case
def bitcast():
    x = torch.tensor([1.0, -2.0, 0.5, 3.25], dtype=torch.float32)
    o = torch.zeros(4, dtype=torch.int32)
    _bitcast_kernel[(1,)](x, o, N=4)
    return _l(o)


# ---- binary / unary ops -------------------------------------------------------------------

@triton.jit
def _int_ops_kernel(a, b, o, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(a + i)
    y = tl.load(b + i)
    tl.store(o + 0 * N + i, x + y)
    tl.store(o + 1 * N + i, x - y)
    tl.store(o + 2 * N + i, x * y)
    tl.store(o + 3 * N + i, x // y)          # C semantics: rounds toward zero
    tl.store(o + 4 * N + i, x % y)           # sign of the dividend
    tl.store(o + 5 * N + i, x << 2)
    tl.store(o + 6 * N + i, x >> 1)
    tl.store(o + 7 * N + i, x & y)
    tl.store(o + 8 * N + i, x | y)
    tl.store(o + 9 * N + i, x ^ y)
    tl.store(o + 10 * N + i, (x < y).to(tl.int32))
    tl.store(o + 11 * N + i, tl.where(x > 0, x, -x))
    tl.store(o + 12 * N + i, tl.minimum(x, y))
    tl.store(o + 13 * N + i, tl.maximum(x, y))
    tl.store(o + 14 * N + i, tl.cdiv(x, 3))
    tl.store(o + 15 * N + i, -x)


@case
def int_binary_ops():
    a = torch.tensor([7, -7, 13, -13, 100, 1, -1, 0], dtype=torch.int32)
    b = torch.tensor([2, 2, -4, -4, 7, 3, 5, 9], dtype=torch.int32)
    o = torch.zeros(16 * 8, dtype=torch.int32)
    _int_ops_kernel[(1,)](a, b, o, N=8)
    return _l(o)


@triton.jit
def _float_ops_kernel(a, b, o, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(a + i)
    y = tl.load(b + i)
    tl.store(o + 0 * N + i, x / y)
    tl.store(o + 1 * N + i, tl.exp(x))
    tl.store(o + 2 * N + i, tl.log(tl.abs(x) + 1.0))
    tl.store(o + 3 * N + i, tl.sqrt(tl.abs(x)))
    tl.store(o + 4 * N + i, tl.sin(x))
    tl.store(o + 5 * N + i, tl.sigmoid(x))
    tl.store(o + 6 * N + i, tl.floor(x))
    tl.store(o + 7 * N + i, tl.fma(x, y, x))
    tl.store(o + 8 * N + i, x % y)
    tl.store(o + 9 * N + i, tl.math.rsqrt(tl.abs(x) + 1.0))


@case
def float_unary_ops():
    a = torch.tensor([0.5, -1.25, 3.0, -0.0, 10.0, -7.5, 2.0, 1e-3], dtype=torch.float32)
    b = torch.tensor([2.0, 0.5, -4.0, 1.0, 0.0, 3.0, -0.25, 8.0], dtype=torch.float32)
    o = torch.zeros(10 * 8, dtype=torch.float32)
    _float_ops_kernel[(1,)](a, b, o, N=8)
    return _l(o)


# ---- reductions and scans -------------------------------------------------------------------

@triton.jit
def _combine(a, b):
    return a * b


@triton.jit
def _reduce_kernel(x, o, oi, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M)[:, None]
    c = tl.arange(0, N)[None, :]
    v = tl.load(x + r * N + c)
    tl.store(o + tl.arange(0, M), tl.sum(v, axis=1))
    tl.store(o + M + tl.arange(0, N), tl.max(v, axis=0))
    mx, idx = tl.max(v, axis=1, return_indices=True)
    tl.store(oi + tl.arange(0, M), idx)
    tl.store(oi + M + tl.arange(0, N), tl.argmin(v, axis=0))
    tl.store(o + M + N + r * N + c, tl.cumsum(v, axis=1))
    tl.store(o + M + N + M * N + r * N + c, tl.associative_scan(v, 0, _combine))
    tl.store(o + M + N + 2 * M * N, tl.reduce(v, None, _combine))


@case
def reductions_and_scans():
    x = (torch.arange(32, dtype=torch.float32).reshape(4, 8) % 7 - 3) / 2
    o = torch.zeros(4 + 8 + 2 * 32 + 1, dtype=torch.float32)
    oi = torch.zeros(12, dtype=torch.int32)
    _reduce_kernel[(1,)](x, o, oi, M=4, N=8)
    return [_l(o), _l(oi)]


@triton.jit
def _histogram_kernel(x, o, N: tl.constexpr, B: tl.constexpr):
    tl.store(o + tl.arange(0, B), tl.histogram(tl.load(x + tl.arange(0, N)), B))


@case
def histogram():
    x = torch.tensor([0, 1, 1, 3, 3, 3, 7, 2, 2, 5, 6, 6, 6, 6, 0, 4], dtype=torch.int32)
    o = torch.zeros(8, dtype=torch.int32)
    _histogram_kernel[(1,)](x, o, N=16, B=8)
    return _l(o)


# ---- atomics -------------------------------------------------------------------------------

@triton.jit
def _atomic_kernel(cnt, mx, bits, xc):
    pid = tl.program_id(0)
    tl.atomic_add(cnt, 1)
    tl.atomic_add(cnt + 1 + tl.arange(0, 4), tl.full((4,), 2, tl.int32), mask=tl.arange(0, 4) < 3)
    tl.atomic_max(mx, pid * 3 - 20)
    tl.atomic_min(mx + 1, 50 - pid)
    tl.atomic_or(bits, 1 << (pid % 31))
    tl.atomic_and(bits + 1, ~(1 << (pid % 31)))
    tl.atomic_xor(bits + 2, pid)
    old = tl.atomic_xchg(xc, pid)
    tl.atomic_add(xc + 1, old)


@case
def atomics():
    n = 24
    cnt = torch.zeros(5, dtype=torch.int32)
    mx = torch.tensor([-100, 100], dtype=torch.int32)
    bits = torch.tensor([0, -1, 0], dtype=torch.int32)
    xc = torch.zeros(2, dtype=torch.int32)
    _atomic_kernel[(n,)](cnt, mx, bits, xc)
    # the xchg chain visits every pid once: last + sum(olds) = sum(0..n-1) whatever the order
    return [_l(cnt), _l(mx), _l(bits), int(xc[0] + xc[1])]


@triton.jit
def _serialized_add(data, lock, SEM: tl.constexpr):
    # test_core.py::test_atomic_cas: take the lock with atomic_cas, read-modify-write a block,
    # debug_barrier, release with atomic_xchg (acq_rel by default)
    ptrs = data + tl.arange(0, 128)
    while tl.atomic_cas(lock, 0, 1, SEM) == 1:
        pass
    tl.store(ptrs, tl.load(ptrs) + 1.0)
    tl.debug_barrier()
    tl.atomic_xchg(lock, 0)


@case
def spin_lock():
    out = []
    for sem in (None, "acquire", "release", "acq_rel", "relaxed"):
        lock = torch.zeros(1, dtype=torch.int32)
        data = torch.zeros(128, dtype=torch.float32)
        _serialized_add[(40,)](data, lock, SEM=sem)
        out.append(sorted(set(data.tolist())))
    return out


# ---- dots ------------------------------------------------------------------------------------

@triton.jit
def _dot_kernel(a, b, c, o, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    rk = tl.arange(0, K)
    x = tl.load(a + rm * K + rk[None, :])
    y = tl.load(b + rk[:, None] * N + rn)
    acc = tl.load(c + rm * N + rn)
    tl.store(o + rm * N + rn, tl.dot(x, y, acc))


@case
def dots():
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-4, 5, (16, 32), generator=g).to(torch.float16)
    b = torch.randint(-4, 5, (32, 16), generator=g).to(torch.float16)
    c = torch.randint(-4, 5, (16, 16), generator=g).to(torch.float32)
    o = torch.zeros(16, 16, dtype=torch.float32)
    _dot_kernel[(1,)](a, b, c, o, M=16, N=16, K=32)
    ai = torch.randint(-8, 8, (16, 16), generator=g).to(torch.int8)
    bi = torch.randint(-8, 8, (16, 16), generator=g).to(torch.int8)
    oi = torch.zeros(16, 16, dtype=torch.int32)
    _int_dot_kernel[(1,)](ai, bi, oi, N=16)
    return [_l(o), _l(oi)]


@triton.jit
def _int_dot_kernel(a, b, o, N: tl.constexpr):
    r = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(o + r, tl.dot(tl.load(a + r), tl.load(b + r), out_dtype=tl.int32))


# ---- block pointers --------------------------------------------------------------------------

@triton.jit
def _block_ptr_kernel(x, o, M: tl.constexpr, N: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_block_ptr(x, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(o, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    for _ in range(0, tl.cdiv(N, BN)):
        v = tl.load(src, boundary_check=(0, 1), padding_option="zero")
        tl.store(dst, v * 2.0 + 1.0, boundary_check=(0, 1))
        src = tl.advance(src, (0, BN))
        dst = tl.advance(dst, (0, BN))


@case
def block_pointers():
    x = torch.arange(5 * 7, dtype=torch.float32).reshape(5, 7)
    o = torch.full((5, 7), -1.0)
    _block_ptr_kernel[(1,)](x, o, M=5, N=7, BM=8, BN=4)
    return _l(o)


# ---- tensor descriptors ------------------------------------------------------------------------

@triton.jit
def _desc_kernel(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    blk = src.load([pid * BM, 0])
    dst.store([pid * BM, 0], blk + 10.0)


@case
def tensor_descriptors():
    x = torch.arange(8 * 16, dtype=torch.float32).reshape(8, 16)
    o = torch.zeros(8, 16)
    _desc_kernel[(2,)](TensorDescriptor.from_tensor(x, [4, 16]), TensorDescriptor.from_tensor(o, [4, 16]), BM=4,
                       BN=16)
    return _l(o)


# ---- tuples -----------------------------------------------------------------------------------

@triton.jit
def _pair(x):
    return x + 1, x * 2


@triton.jit
def _tuple_kernel(ptrs, scales, N: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(ptrs[0] + i)
    p, q = _pair(a)
    tl.store(ptrs[1] + i, p * scales[0])
    tl.store(ptrs[2] + i, q + scales[1])


@case
def tuples():
    a = torch.arange(4, dtype=torch.float32)
    b = torch.zeros(4)
    c = torch.zeros(4)
    _tuple_kernel[(1,)]((a, b, c), (3.0, 0.5), N=4)
    return [_l(b), _l(c)]


# ---- constexpr and static_range ------------------------------------------------------------------

@triton.jit
def _constexpr_kernel(o, N: tl.constexpr, MODE: tl.constexpr):
    acc = tl.zeros((N,), tl.int32)
    for k in tl.static_range(1, 4):
        acc += tl.arange(0, N) * k
    if MODE == "neg":
        acc = -acc
    HALF: tl.constexpr = N // 2
    tl.store(o + tl.arange(0, N), acc + HALF)


@case
def constexpr_static_range():
    o1 = torch.zeros(8, dtype=torch.int32)
    o2 = torch.zeros(8, dtype=torch.int32)
    _constexpr_kernel[(1,)](o1, N=8, MODE="pos")
    _constexpr_kernel[(1,)](o2, N=8, MODE="neg")
    return [_l(o1), _l(o2)]


# ---- program ids ------------------------------------------------------------------------------

@triton.jit
def _pid_kernel(o):
    x = tl.program_id(0)
    y = tl.program_id(1)
    z = tl.program_id(2)
    lin = (x * tl.num_programs(1) + y) * tl.num_programs(2) + z
    tl.store(o + lin * 3 + tl.arange(0, 4), tl.where(tl.arange(0, 4) == 0, x, tl.where(tl.arange(0, 4) == 1, y, z)),
             mask=tl.arange(0, 4) < 3)


@case
def program_ids():
    o = torch.full((2 * 3 * 2 * 3,), -1, dtype=torch.int32)
    _pid_kernel[(2, 3, 2)](o)
    return _l(o)


# ---- printing and asserts ------------------------------------------------------------------------

@triton.jit
def _print_kernel(x):
    v = tl.load(x + tl.arange(0, 4))
    tl.device_print("v=", v)
    tl.device_print("hex ", v.to(tl.int32), hex=True)
    tl.static_print("static", v.shape)


@case
def printing():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        _print_kernel[(2,)](torch.arange(4, dtype=torch.float32))
    # the programs of a launch run concurrently on the simulator: compare the set of lines
    return sorted(buf.getvalue().splitlines())


@triton.jit
def _assert_kernel(x, LIMIT: tl.constexpr):
    v = tl.load(x + tl.arange(0, 4))
    tl.device_assert(v < LIMIT, "v too large")
    tl.store(x + tl.arange(0, 4), v + 1)


@case
def device_assert_passes():
    x = torch.arange(4, dtype=torch.int32)
    _assert_kernel[(1,)](x, LIMIT=10)
    return _l(x)


@case
def device_assert_fails():
    _assert_kernel[(1,)](torch.arange(4, dtype=torch.int32), LIMIT=2)
    return "no error"


# ---- errors raised ---------------------------------------------------------------------------------

@triton.jit
def _arange_kernel(o):
    tl.store(o + tl.arange(0, 3), 1.0)


@case
def error_arange_not_power_of_two():
    _arange_kernel[(1,)](torch.zeros(4))
    return "no error"


@triton.jit
def _overflow_kernel(o):
    huge: tl.constexpr = 0xFFFFFFFFFFFFFF
    x = tl.full((), 32, dtype=tl.int32)
    tl.store(o, (x + huge).to(tl.float32))


@case
def error_scalar_overflow():
    _overflow_kernel[(1,)](torch.zeros(1))
    return "no error"


@triton.jit
def _static_assert_kernel(o, N: tl.constexpr):
    tl.static_assert(N % 2 == 0, "N must be even")
    tl.store(o, 1.0)


@case
def error_static_assert():
    _static_assert_kernel[(1,)](torch.zeros(1), N=3)
    return "no error"


def outcome(name):
    """What case `name` produced, or ["raised", type, is TritonError, cause type, first line]."""
    try:
        return CASES[name]()
    except Exception as e:  # noqa: BLE001 - what was raised is the result
        text = str(e).splitlines()[0] if str(e) else ""
        return ["raised", type(e).__name__, isinstance(e, triton.TritonError), type(e.__cause__).__name__, text]


def all_outcomes(names=None):
    return {n: outcome(n) for n in (names or CASES)}


if __name__ == "__main__":          # the plain interpreter's outcomes, as JSON on the last line
    import json
    import sys
    np.seterr(all="ignore")
    print(json.dumps(all_outcomes(sys.argv[1:] or None)))
