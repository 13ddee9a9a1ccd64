"""LLVM IR -> native code with llvmlite's ORC LLJIT (never MCJIT: it cannot take the symbols the
module imports from Python callbacks), and MLIR memref descriptors as ctypes sees them."""
from __future__ import annotations

import ctypes
import re
import threading

_lock = threading.Lock()
_initialized = [False]
_keep: list = []         # JIT instances and the callbacks they call: alive as long as the process
_base_symbols: dict = {}


def _init():
    if _initialized[0]:
        return
    import llvmlite.binding as llvm
    try:
        llvm.initialize()        # a no-op, or an error that says it is one, on new llvmlite
    except Exception:  # noqa: BLE001 - llvmlite >= 0.45 initializes itself and refuses the call
        pass
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    libc = ctypes.CDLL(None)
    for name in ("malloc", "free", "aligned_alloc", "memcpy", "memset", "memmove", "abort"):
        _base_symbols[name] = ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
    # half-precision conversions LLVM calls on x86-64 without F16C: libgcc_s defines them
    try:
        libgcc = ctypes.CDLL("libgcc_s.so.1")
        for name in ("__extendhfsf2", "__truncsfhf2", "__truncdfhf2", "__extendbfsf2", "__truncsfbf2"):
            fn = getattr(libgcc, name, None)
            if fn is not None:
                _base_symbols[name] = ctypes.cast(fn, ctypes.c_void_p).value
    except OSError:
        pass
    _initialized[0] = True


class Compiled:
    """One JIT-compiled module: addresses of its exported functions."""

    def __init__(self, resource, names):
        self._rt = resource
        self.names = names

    def address(self, name: str) -> int:
        return self._rt[name]


def compile_ir(ir_text: str, symbols: dict, exports) -> Compiled:
    """JIT `ir_text`; `symbols` maps each external name it calls to an address (ctypes callbacks
    must be kept alive by the caller)."""
    import llvmlite.binding as llvm
    with _lock:
        _init()
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
        lljit = llvm.create_lljit_compiler(tm)
        b = llvm.JITLibraryBuilder().add_ir(str(mod))
        for name, addr in {**_base_symbols, **symbols}.items():
            b = b.import_symbol(name, addr)
        for e in exports:
            b = b.export_symbol(e)
        rt = b.link(lljit, f"hivm_kernel_{len(_keep)}")
        _keep.append((lljit, rt, tm))
        return Compiled(rt, list(exports))


_DECL = re.compile(r"^declare\s+(?:[\w()]+\s+)*?(\S+)\s+@([\w.$]+)\(([^)]*)\)", re.M)
_DEFINE = re.compile(r"^define\s+(?:[\w()]+\s+)*?(\S+)\s+@([\w.$]+)\(([^)]*)\)", re.M)


def _types(params: str) -> list:
    out = []
    for p in params.split(","):
        p = p.strip()
        if p:
            out.append(p.split()[0])
    return out


def declarations(ir_text: str) -> dict:
    """name -> (return type, [parameter types]) of every function the module declares."""
    return {m.group(2): (m.group(1), _types(m.group(3))) for m in _DECL.finditer(ir_text)}


def definition(ir_text: str, name: str):
    for m in _DEFINE.finditer(ir_text):
        if m.group(2) == name:
            return m.group(1), _types(m.group(3))
    return None


CTYPES = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64, "i32": ctypes.c_int32, "i16": ctypes.c_int16,
          "i8": ctypes.c_int8, "i1": ctypes.c_bool, "float": ctypes.c_float, "double": ctypes.c_double,
          "void": None}


HALF_TYPES = ("half", "bfloat")


def ctype(llvm_type: str):
    """The ctypes type of an LLVM scalar type.  half and bfloat travel in an SSE register on x86-64
    (the low 16 bits of xmm), where ctypes reads a c_float: `half_bits` gets their 16 bits back."""
    if llvm_type in HALF_TYPES:
        return ctypes.c_float
    if llvm_type not in CTYPES:
        raise TypeError(f"no ctypes type for LLVM type {llvm_type!r}")
    return CTYPES[llvm_type]


def descriptor(addr: int, rank: int):
    """(aligned pointer, offset, sizes, strides) of a ranked memref descriptor at `addr`
    (MLIR's C interface: {T* allocated, T* aligned, i64 offset, i64 sizes[R], i64 strides[R]})."""
    p = (ctypes.c_int64 * (3 + 2 * rank)).from_address(addr)
    return p[1], p[2], tuple(p[3:3 + rank]), tuple(p[3 + rank:3 + 2 * rank])


def half_bits(value: float) -> int:
    """The low 16 bits of the float register a half/bfloat argument arrived in (see ctype)."""
    import struct
    return struct.unpack("<I", struct.pack("<f", value))[0] & 0xFFFF
