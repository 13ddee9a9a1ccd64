"""The template-library functions a module after convert-hivm-to-std calls, in numpy.

bishengir-compile's convert-hivm-to-std turns each HIVM op into a call of a function of
AscendNPU-IR's template library (bishengir/lib/Template, tag v1.2.0 = 8796a8ac), which hivmc
links on an NPU.  Their C signatures (memref_t<T, R>* descriptors, scalars by value) are the
ones the CPU-lowered module calls through MLIR's C interface, so each is bound here by name:

- `_mlir_ciface_load_gm_to_ubuf_<R>d_<T>(src*, dst*, PadMode pad_mode, T pad_value,
  int64_t left_padding_num)` (Template/include/DMA/DMAUtils.h:1191-1195): the GM view is
  copied into the UB view; the `left_padding_num` elements before dst are filled with pad_value
  (PadMode::Null pads 0: DMAUtils.h:28-32, lib/DMA/Ubuf/Copy1D.cpp:85-97);
- `_mlir_ciface_store_ubuf_to_gm_<R>d_<T>(src*, dst*, AtomicKind)` (DMAUtils.h:1203-1207),
  AtomicKind None/Add/Max/Min = 0..3 (DMAUtils.h:40);
- element-wise `v<op>_<R>d_<T>(src0*, src1*, dst*, tmp*)`, `v<op>_vs_..(src0*, scalar, dst*, tmp*)`,
  `v<op>_sv_..(scalar, src1*, dst*, tmp*)`, `v<op>_..(src0*, dst*, tmp*)`
  (Template/include/Vector/VecUtils.h:971-1022);
- `vcmp_<cond>` / `vcmps_<cond>` (Vector/CmpSel/CmpUtils.h:105-116), `vsel_{vv,vs,sv,ss}`
  (Vector/CmpSel/SelUtils.h:47-160), `broadcast_scalar_<T>_to_<R>d(scalar, dst*)`
  (Vector/Broadcast/BrcUtils.h:281), `arange_<R>d_<T>(dst*, offset, strides...)`
  (Vector/Arange/ArangeUtils.h:27-44: dst[i] = offset + i*stride), reductions
  `[enablevc_|enablevcg_]reduce_<op>_<r|ar|ra>_<T>(src*, dst*, tmp*, init)`
  (Vector/Reduction/ReductionUtils.h:876-900).

Every GM operand is checked against the live buffers and every UB operand against the core's
UB (memory.py) before the copy runs.  A function the module calls that is not here fails the
launch naming it (`unknown`): nothing is guessed.
"""
from __future__ import annotations

import ctypes
import re
import threading

import numpy as np

from . import memory as M, templates_layout, views

BF16 = "bf16"      # bfloat16_t: no numpy dtype; stored as its 16 bits, computed through float32
DTYPES = {"float": np.float32, "half": np.float16, "double": np.float64, "bool": np.bool_, "bfloat16_t": BF16,
          "int8_t": np.int8, "int16_t": np.int16, "int32_t": np.int32, "int64_t": np.int64,
          "uint8_t": np.uint8, "uint16_t": np.uint16, "uint32_t": np.uint32, "uint64_t": np.uint64}
_T = "(" + "|".join(DTYPES) + ")"

PAD_NULL, PAD_FIRST_ELEM, PAD_VALUE = 0, 1, 2            # DMAUtils.h:28-32
ATOMIC_NONE, ATOMIC_ADD, ATOMIC_MAX, ATOMIC_MIN = 0, 1, 2, 3   # DMAUtils.h:40

BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
          "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
SCALAR_OPS = {"adds": "add", "muls": "mul", "maxs": "max", "mins": "min", "sub": "sub", "div": "div",
              "ands": "and", "ors": "or"}
UNARY = {"exp": np.exp, "ln": np.log, "abs": np.abs, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
         "relu": lambda x: np.maximum(x, 0), "not": lambda x: np.logical_not(x) if x.dtype == np.bool_ else ~x,
         "rec": lambda x: 1 / x, "tanh": np.tanh, "neg": np.negative}
CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "gt": np.greater, "le": np.less_equal,
       "ge": np.greater_equal}
# reductions as their ufuncs' reduce, which np.sum/np.max/... call (the same arithmetic, without
# their Python wrappers' few microseconds a call)
REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}
REDUCE_INIT_COMBINE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def storage(dtype):
    """The numpy dtype a template element type is stored as."""
    return np.dtype(np.uint16) if dtype is BF16 else np.dtype(dtype)


def bf16_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round to nearest even, as a float32 -> bfloat16 conversion does (NaN kept quiet)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(np.asarray(x, dtype=np.float32)), np.uint16(0x7FC0), rounded)


_SCALAR_TYPES: dict = {}      # template element type -> (numpy scalar type, is half): looked up once


def _scalar(value, dtype):
    """A scalar argument as the template gets it (half and bfloat16 travel as their 16 bits)."""
    if dtype is BF16:
        return np.uint16(value)
    got = _SCALAR_TYPES.get(dtype)
    if got is None:
        dt = np.dtype(dtype)
        got = _SCALAR_TYPES[dtype] = (dt.type, dt == np.float16)
    if got[1] and isinstance(value, int):
        return np.uint16(value).view(np.float16)
    return got[0](value)


class Bits:
    """A bool memref in UB: one bit per element, element i at bit (offset + i*stride) of the aligned
    pointer, least significant bit first (Vector/CmpSel/Cmp1D.cpp:129-145 set_result_bit,
    Vector/VecUtils.h:1493-1505 get_condition_bit; v1.2.0).  PlanMemory sizes i1 buffers so
    (memref<8x16xi1> takes 32 bytes)."""

    def __init__(self, ptr, rank, what):
        self.distinct = None          # whether the lanes' bits are distinct (set() finds out once)
        self.v = M.view(ptr, rank, 1)
        n = int(np.prod(self.v.sizes)) if self.v.sizes else 1
        if n and not self.v.empty:
            idx = np.indices(self.v.sizes).reshape(len(self.v.sizes), -1)
            self.pos = self.v.offset + sum(i * st for i, st in zip(idx, self.v.strides))
            lo, hi = int(self.pos.min()) // 8, int(self.pos.max()) // 8 + 1
            span = M.View(self.v.aligned, lo, (hi - lo,), (1,), 1, self.v.allocated)
            M.check_ub(span, what, vector=False)
            self.bytes = span.array(np.uint8)
            self.lo = lo
        else:
            self.pos = np.zeros(0, dtype=np.int64)

    def get(self):
        if not len(self.pos):
            return np.zeros(self.v.sizes, dtype=np.bool_)
        b = self.bytes[self.pos // 8 - self.lo]
        return ((b >> (self.pos % 8)) & 1).astype(np.bool_).reshape(self.v.sizes)

    def set(self, values):
        values = np.broadcast_to(np.asarray(values, dtype=np.bool_), self.v.sizes).ravel()
        at = self.pos - self.lo * 8
        if self.distinct is None:
            self.distinct = bool(np.bincount(at).max() <= 1)
        if self.distinct:
            # set_result_bit on distinct bits: the order does not matter, so all at once (the bytes
            # unpacked least significant bit first, the lanes' bits replaced, packed back)
            bits = np.unpackbits(self.bytes, bitorder="little")
            bits[at] = values
            self.bytes[...] = np.packbits(bits, bitorder="little")
            return
        for p, x in zip(self.pos, values):       # set_result_bit, bit by bit: a later lane wins
            byte, bit = p // 8 - self.lo, p % 8
            self.bytes[byte] = (self.bytes[byte] | (1 << bit)) if x else (self.bytes[byte] & ~(1 << bit) & 0xFF)


def _bits(ptr, rank, what):
    """The Bits of a bool operand: like views.ub, built and checked once per core's pool and reused
    (its positions and byte view depend only on the descriptor and the pool's UB)."""
    s = M.state()
    pool = getattr(s, "pool", None)
    if pool is None:
        return Bits(ptr, rank, what)
    key = ("bits", ctypes.string_at(ptr, 8 * (3 + 2 * rank)), rank)
    got = pool.views.get(key)
    if got is None:
        got = Bits(ptr, rank, what)
        if s.spaces.get("ub") is not None and s.spaces.get("ub") is pool.spaces.get("ub"):
            pool.views[key] = got       # checked against this pool's UB (Bits.__init__)
    return got


class Call:
    """The operands of one template function (name, rank, element type): its descriptors as numpy
    views, checked.  Made once per bound function (nothing in it changes from call to call)."""

    def __init__(self, name, rank, dtype):
        self.name, self.rank, self.dtype = name, rank, storage(dtype)
        self.bool = self.dtype == np.bool_
        self.operand = f"{name} operand"
        self._what = {"operand": self.operand}
        self._gm_what = {k: f"{name} ({op} as the compiler made it)" for k, op in (("read", "tl.load"),
                                                                                  ("write", "tl.store"))}

    def read(self, ptr, dtype=None):
        """An operand's values (a bool operand unpacked from its bits)."""
        if dtype is None:
            if self.bool:
                return _bits(ptr, self.rank, self.operand).get()
            return views.ub(ptr, self.rank, self.dtype, self.operand)
        if np.dtype(storage(dtype)) == np.bool_:
            return _bits(ptr, self.rank, self.operand).get()
        return self.ub(ptr, dtype)

    def write(self, ptr, values, dtype=None):
        if (self.bool if dtype is None else np.dtype(storage(dtype)) == np.bool_):
            _bits(ptr, self.rank, f"{self.name} result").set(values)
        elif dtype is None:
            views.ub(ptr, self.rank, self.dtype, self.operand)[...] = values
        else:
            self.ub(ptr, dtype)[...] = values

    def ub(self, ptr, dtype=None, rank=None, vector=True, what="operand", space="ub"):
        dt = storage(dtype) if dtype is not None else self.dtype
        w = self._what.get(what) or self._what.setdefault(what, f"{self.name} {what}")
        return views.ub(ptr, rank or self.rank, dt, w, space, vector)

    def gm(self, ptr, kind):
        """The global-memory operand's values (a view), checked against the live buffers."""
        return views.gm(ptr, self.rank, self.dtype, self._gm_what[kind], kind)


def _load(name, rank, dt):
    c = Call(name, rank, dt)

    def run(src, dst, pad_mode, pad_value, left_pad):
        g = c.gm(src, "read")
        if left_pad:
            dv = M.view(dst, rank, c.dtype.itemsize)
            # the padding sits before dst's first element (Copy1D.cpp:97)
            padded = M.View(dv.aligned, dv.offset - left_pad * dv.strides[-1],
                            dv.sizes[:-1] + (dv.sizes[-1] + left_pad,), dv.strides, dv.itemsize, dv.allocated)
            M.check_ub(padded, f"{name} destination", vector=False)
            value = 0 if pad_mode == PAD_NULL else _scalar(pad_value, dt)
            padded.array(c.dtype)[..., :left_pad] = value
        c.ub(dst, vector=False, what="destination")[...] = g
    return run


def _store(name, rank, dt):
    c = Call(name, rank, dt)

    def run(src, dst, atomic):
        s = c.ub(src, vector=False)
        g = c.gm(dst, "write")
        if atomic != ATOMIC_NONE and dt is BF16:
            raise M.DeviceFault(f"{name}: an atomic bfloat16 store is not modelled by the hivm backend yet")
        if atomic == ATOMIC_NONE:
            g[...] = s
            return
        with _ATOMIC:           # the read-modify-write of an atomic store is one step for every core of the rank
            _atomic(g, s, atomic, name)
    return run


# one lock for the atomic stores of this rank's cores (threads); a peer rank's atomics on the same
# symmetric memory are not serialised with them (not modelled)
_ATOMIC = threading.Lock()


def _atomic(g, s, atomic, name):
    with np.errstate(all="ignore"):
        if atomic == ATOMIC_ADD:
            g[...] = g + s
        elif atomic == ATOMIC_MAX:
            g[...] = np.maximum(g, s)
        elif atomic == ATOMIC_MIN:
            g[...] = np.minimum(g, s)
        else:
            raise M.DeviceFault(f"{name}: atomic kind {atomic} is none of None/Add/Max/Min (DMAUtils.h:40)")


def _with_errstate(fn):
    """Marks a template whose arithmetic may give inf/nan: as the vector unit gives them, with no
    warning.  The runner runs every block under np.errstate(all="ignore") (runner.LaunchArgs._run),
    once per block rather than once per call (an errstate context costs about 2 us)."""
    return fn


def handler(name: str, params: list):
    """The Python implementation of template function `name` (without _mlir_ciface_), or None."""
    fn = templates_layout.handler(name, params)        # transposes (templates_layout.py)
    if fn is not None:
        return fn
    m = re.fullmatch(r"load_gm_to_ubuf_(\d)d_" + _T, name)
    if m:
        return _load(name, int(m[1]), DTYPES[m[2]])
    m = re.fullmatch(r"store_ubuf_to_gm_(\d)d_" + _T, name)
    if m:
        return _store(name, int(m[1]), DTYPES[m[2]])
    m = re.fullmatch(r"set_l1_2d_" + _T, name)
    if m:       # DMA/SET2D.h:63-77: set_l1_2d_<T>(T scalar, memref_t<__cbuf__ T, 1>* dst): dst filled with scalar
        dt = DTYPES[m[1]]

        c = Call(name, 1, dt)

        def set_l1(value, dst):
            c.ub(dst, vector=False, what="destination", space="cbuf")[...] = _scalar(value, dt)
        return set_l1
    m = re.fullmatch(r"nd2nz_" + _T, name)
    if m:
        return _nd2nz(name, DTYPES[m[1]])
    m = re.fullmatch(r"mma_tile_" + _T + "_to_" + _T, name)
    if m:
        return _mma(name, DTYPES[m[1]], DTYPES[m[2]])
    m = re.fullmatch(r"fixpipe_nz2nd_" + _T + "_to_" + _T + r"_4d_to_2d", name)
    if m:
        return _fixpipe(name, DTYPES[m[1]], DTYPES[m[2]])
    m = re.fullmatch(r"copy_(ubuf|cbuf)_to_(ubuf|cbuf)_(\d)d_" + _T, name)
    if m:
        # DMAUtils.h:1220-1228: copy_<src scope>_to_<dst scope>_<R>d_<T>(src*, dst*).  bishengir-compile 1.2.0's
        # convert-hivm-to-std declares it with two more parameters (i32 pad mode, T pad value), which the
        # v1.2.0 template does not take (a C call ignores them): taken and ignored here

        rank, dt = int(m[3]), DTYPES[m[4]]
        src_space, dst_space = ("ub" if m[1] == "ubuf" else "cbuf"), ("ub" if m[2] == "ubuf" else "cbuf")
        c = Call(name, rank, dt)


        def copy(src, dst, *_pad):
            sv = c.ub(src, vector=False, what="source", space=src_space)
            dv = c.ub(dst, vector=False, what="destination", space=dst_space)
            dv[...] = sv.copy()
        return copy
    m = re.fullmatch(r"broadcast_scalar_" + _T + r"_to_(\d)d", name)
    if m:
        dt, rank = DTYPES[m[1]], int(m[2])

        c = Call(name, rank, dt)

        def brc(value, dst):
            c.write(dst, _scalar(value, dt))
        return brc
    m = re.fullmatch(r"arange_(\d)d_" + _T, name)
    if m:
        rank, dt = int(m[1]), DTYPES[m[2]]

        c = Call(name, rank, dt)

        def arange(dst, offset, *strides):
            d = c.ub(dst)
            idx = np.indices(d.shape) if d.size else np.zeros((rank,) + d.shape, dtype=np.int64)
            d[...] = (offset + sum(i * s for i, s in zip(idx, strides))).astype(dt)
        return arange
    m = re.fullmatch(r"(?:enablevcg?_)?reduce_(sum|max|min|prod)_(r|ar|ra)_" + _T, name)
    if m:
        op, axes, dt = m[1], m[2], DTYPES[m[3]]
        rank = len(axes)
        c = Call(name, rank, dt)


        def reduce(src, dst, tmp, init):
            s, d = c.ub(src), c.ub(dst)
            axis = None if axes == "r" else (rank - 1 if axes == "ar" else 0)
            r = REDUCE[op].reduce(s, axis=axis, keepdims=axis is not None)
            d[...] = REDUCE_INIT_COMBINE[op](r, _scalar(init, dt)).astype(dt)
        return _with_errstate(reduce)
    m = re.fullmatch(r"vcmps?_(eq|ne|lt|gt|le|ge)_(\d)d_" + _T, name)
    if m:
        f, rank, dt = CMP[m[1]], int(m[2]), DTYPES[m[3]]
        scalar = name.startswith("vcmps_")
        c = Call(name, rank, dt)


        def cmp(a, b, dst):
            rhs = _scalar(b, dt) if scalar else c.read(b)
            c.write(dst, f(c.read(a), rhs), np.bool_)
        return cmp
    m = re.fullmatch(r"vsel_(vv|vs|sv|ss)_(\d)d_(?:bool_)?" + _T, name)    # bf16: selects bits
    if m:
        form, rank, dt = m[1], int(m[2]), DTYPES[m[3]]
        c = Call(name, rank, dt)


        def sel(cond, a, b, dst, _tmp=None):
            x = c.read(a) if form[0] == "v" else _scalar(a, dt)
            y = c.read(b) if form[1] == "v" else _scalar(b, dt)
            c.write(dst, np.where(c.read(cond, np.bool_), x, y))
        return sel
    m = re.fullmatch(r"vcast_" + _T + "_to_" + _T + r"_(\d)d(?:_with_mode|_with_overflow(?:_no_size_align)?|"
                     r"_with_temp)?", name)
    if m:
        return _cast(name, DTYPES[m[1]], DTYPES[m[2]], int(m[3]), len(params))
    m = re.fullmatch(r"v([a-z]+?)(?:_(vs|sv))?_(\d)d_" + _T, name)
    if m:
        op, form, rank, dt = m[1], m[2], int(m[3]), DTYPES[m[4]]
        if form in ("vs", "sv"):
            f = BINARY.get(SCALAR_OPS.get(op, op))
            if f is None:
                return None
            c = Call(name, rank, dt)


            def vs(a, b, dst, _tmp=None):
                if form == "vs":
                    out = f(c.read(a), _scalar(b, dt))
                else:
                    out = f(_scalar(a, dt), c.read(b))
                c.write(dst, out)
            return _with_errstate(vs)
        if op in BINARY:
            f = BINARY[op]
            c = Call(name, rank, dt)


            def vv(a, b, dst, _tmp=None):
                c.write(dst, f(c.read(a), c.read(b)))
            return _with_errstate(vv)
        if op in UNARY:
            f = UNARY[op]
            c = Call(name, rank, dt)


            def v(a, dst, _tmp=None):
                c.write(dst, f(c.read(a)))
            return _with_errstate(v)
    return None


# CastMode (Vector/Cast/CastUtils.h:30-38, v1.2.0): R=0 A=1 F=2 C=3 Z=4 O=5 OVERFLOW=6.  The rounding
# each names (R: to nearest even, A: half away from zero, F: floor, C: ceil, Z: toward zero) is
# inferred from the names, not verified; O (round to odd) is taken as R.
ROUNDING = {0: np.rint, 1: lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), 2: np.floor, 3: np.ceil, 4: np.trunc,
            5: np.rint, 6: np.trunc}


def _cast(name, src_t, dst_t, rank, nparams):
    c, to = Call(name, rank, src_t), Call(name, rank, dst_t)
    # the same float type on both sides with a CastMode rounds to an integral value by the mode
    # (Cast1D.cpp:164-171 v1.2.0, scalar_cast_float_to_float: "round via int64 intermediate, then cast
    # back"; the vector path is vconv_f322f32{r,a,f,c,z}, Cast1D.cpp:309-311): bishengir-compile
    # range-reduces tl.sin with it.  bf16 -> bf16 taken the same way: inferred, not verified.
    to_integral = src_t is dst_t and name.endswith("_with_mode") and np.dtype(
        np.float32 if src_t is BF16 else src_t).kind == "f"

    def run(src, dst, *rest):
        mode = int(rest[-1]) if rest else 0
        x = c.read(src)
        x = bf16_to_f32(x) if src_t is BF16 else x
        if to_integral:
            x = ROUNDING.get(mode, np.rint)(x.astype(np.float64)).astype(x.dtype)
        if dst_t is np.bool_:
            to.write(dst, x != 0)
            return
        d = to.ub(dst)
        if dst_t is BF16:
            d[...] = f32_to_bf16(x.astype(np.float32))
            return
        out = np.dtype(dst_t)
        if out.kind in "iub" and x.dtype.kind == "f":
            # float -> integer: rounded by the mode, saturated to the range (inferred: the vector
            # unit's conversions saturate; triton-ascend's default overflow_mode)
            r = ROUNDING.get(mode, np.rint)(x.astype(np.float64))
            if out.kind == "b":
                d[...] = r != 0
                return
            info = np.iinfo(out)
            d[...] = np.clip(np.nan_to_num(r), info.min, info.max).astype(out)
        elif out.kind in "iu" and x.dtype.kind in "iub":
            d[...] = x.astype(out)           # integer narrowing wraps (with_overflow), inferred
        else:
            d[...] = x.astype(out)           # numpy rounds to nearest even, the R mode
    return _with_errstate(run)


# --- the cube path: NZ-fractal buffers ---------------------------------------------------------------
# An on-chip matrix of M x N elements in the NZ layout is a 4-D memref <N1 x M1 x M0 x N0> (the
# module's own types: a 16x16 fp32 tile in L1 is memref<2x1x16x8xf32, cbuf>, C0 = 32 bytes / 4, and
# in L0C memref<1x1x16x16xf32, cc>): element (i, j) at [j // N0, i // M0, i % M0, j % N0].  The layout
# is read from those types; its use by the three templates below (nd2nz: DMA/ND2NZ.h:60-69,
# mma_tile: Cube/LocalMmad/LocalMmadUtils.h:95-114, fixpipe_nz2nd) is inferred from their names and
# parameters, and checked only against numpy's matmul on whole kernels (tests/test_hivm_backend.py).

def _nz_view(ptr, dt, what, space):
    return views.ub(ptr, 4, storage(dt), what, space, vector=False)


def nz_to_2d(a):
    n1, m1, m0, n0 = a.shape
    return a.transpose(1, 2, 0, 3).reshape(m1 * m0, n1 * n0)


def write_nz(a, full):
    n1, m1, m0, n0 = a.shape
    a[...] = full.reshape(m1, m0, n1, n0).transpose(2, 0, 1, 3)


def _math(x, dt):
    return bf16_to_f32(x) if dt is BF16 else x


def _nd2nz(name, dt):
    c, what = Call(name, 2, dt), f"{name} destination"

    def run(src, dst):
        g = c.gm(src, "read")
        d = _nz_view(dst, dt, what, "cbuf")
        # only the source's rows and columns are written: the rest keeps what set_l1_2d_<T> put there
        # (a masked load's `other`), inferred from the module calling set_l1 first
        n1, m1, m0, n0 = d.shape
        if g.shape == (m1 * m0, n1 * n0):
            write_nz(d, g)          # the whole tile: nothing of the old contents is kept
            return
        full = nz_to_2d(d).copy()
        full[:g.shape[0], :g.shape[1]] = g
        write_nz(d, full)
    return run


def _mma(name, src_t, dst_t):
    what_a, what_b, what_c = f"{name} A", f"{name} B", f"{name} C"

    def run(a, b, init, m, k, n, dst, *_events):
        a2 = _math(nz_to_2d(_nz_view(a, src_t, what_a, "cbuf")), src_t)
        b2 = _math(nz_to_2d(_nz_view(b, src_t, what_b, "cbuf")), src_t)
        d = _nz_view(dst, dst_t, what_c, "cc")
        prod = a2[:m, :k].astype(np.float64) @ b2[:k, :n].astype(np.float64)
        n1, m1, m0, n0 = d.shape
        if init and (m, n) == (m1 * m0, n1 * n0):
            write_nz(d, prod)       # the whole tile initialised: C's old contents are not read
            return
        # nz_to_2d copies (or, for one column block, is a view of d: written back below all the same)
        c2 = nz_to_2d(d)
        c2[:m, :n] = prod if init else c2[:m, :n] + prod
        write_nz(d, c2.astype(storage(dst_t), copy=False))
    return _with_errstate(run)


def _fixpipe(name, src_t, dst_t):
    c, what = Call(name, 2, dst_t), f"{name} source"

    def run(src, dst, *_params):
        s = nz_to_2d(_nz_view(src, src_t, what, "cc"))
        g = c.gm(dst, "write")
        part = s[:g.shape[0], :g.shape[1]]
        g[...] = f32_to_bf16(part) if dst_t is BF16 else part.astype(c.dtype)
    return _with_errstate(run)
