"""The one table: distributed op -> aclshmem device-library symbol, core type, memory effects.

Both the simulator (sim/primitives.py registers one implementation per symbol family)
and the HIVM lowering (backend_ascend) read this table, so what the simulator runs is,
name for name, what the NPU would link.  Facts from docs/semantics.md §3-§6.
"""
from __future__ import annotations

from dataclasses import dataclass

# --- constants (docs/semantics.md §4) -------------------------------------------------------
ACLSHMEM_SIGNAL_SET = 0
ACLSHMEM_SIGNAL_ADD = 1
# The distributed dialect numbers SET/ADD differently from the device library.
DIALECT_SIGNAL_SET = 1
DIALECT_SIGNAL_ADD = 2

ACLSHMEM_CMP_EQ, ACLSHMEM_CMP_NE, ACLSHMEM_CMP_GT = 0, 1, 2
ACLSHMEM_CMP_GE, ACLSHMEM_CMP_LT, ACLSHMEM_CMP_LE = 3, 4, 5
CMP_NAMES = {0: "==", 1: "!=", 2: ">", 3: ">=", 4: "<", 5: "<="}

COMM_SCOPES = {"gpu": 1, "intra_node": 2, "inter_node": 3}
WAIT_SCOPES = ("gpu", "cta", "sys")
WAIT_SEMANTICS = ("acquire", "release", "acq_rel", "relaxed")
SIG_OPS = {"set": ACLSHMEM_SIGNAL_SET, "add": ACLSHMEM_SIGNAL_ADD}

OP_ENGINE_TYPES = {"MTE": 0x1, "SDMA": 0x2, "ROCE": 0x4, "UDMA": 0x8}
ACLSHMEM_TEAM_WORLD = 0

CACHE_LINE_BYTES = 64
# Every signal slot sits alone in a 64-byte line: two cores writing different bytes of
# one line through their write-back caches would lose an update.
SIGNAL_SLOT_BYTES = CACHE_LINE_BYTES


def signal_slot_stride(itemsize: int) -> int:
    """Elements between consecutive signal slots: 16 for int32, 8 for int64."""
    return CACHE_LINE_BYTES // itemsize


# --- type names used in symbols (docs/semantics.md §6) -----------------------------------------
# Keyed by triton dtype name.  Exactly the element types AscendNPU-IR's aclshmem wrapper
# library instantiates its typed wrappers for (bishengir/lib/Template/lib/Shmem/Shmem.cpp:
# ACLSHMEM_PTR_WRAPPER, ACLSHMEM_EXPAND_GETPUT_MEM_OPS, ... over half, float, bfloat16,
# int8..int64, uint8..uint64; plus `char`, which no triton dtype names).  There is no
# `double`: a kernel using fp64 with a typed op is refused on every backend.
TYPE_NAMES = {
    "bf16": "bfloat16", "fp16": "half", "fp32": "float",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
}

# --- core types ------------------------------------------------------------------------
VECTOR = "VECTOR"
CUBE_AND_VECTOR = "CUBE_AND_VECTOR"

# Prefix table, consulted before the "does the module hold a dot" rule.
CORE_TYPE_PREFIXES = (
    ("aclshmemx_barrier_all_vec", VECTOR),
    ("aclshmemx_barrier_vec", VECTOR),
    ("aclshmem_barrier_all", CUBE_AND_VECTOR),
    ("aclshmem_putmem_signal_nbi", VECTOR),
    ("aclshmem_putmem_signal", VECTOR),
    ("aclshmem_putmem_nbi", VECTOR),
    ("aclshmem_getmem_nbi", VECTOR),
    ("aclshmem_putmem", VECTOR),
    ("aclshmem_getmem", VECTOR),
)


def core_type(symbol: str, module_has_dot: bool) -> str:
    for prefix, core in CORE_TYPE_PREFIXES:
        if symbol.startswith(prefix):
            return core
    return CUBE_AND_VECTOR if module_has_dot else VECTOR


# --- the op table ----------------------------------------------------------------------
NONE, READ, WRITE, READ_WRITE = "none", "read", "write", "read_write"


@dataclass(frozen=True)
class OpSpec:
    op: str        # name in dl / libshmem_device
    symbol: str    # aclshmem symbol; "{type}" is filled with TYPE_NAMES[dtype]
    effects: str   # memory effects of the source op (no_side_effect iff NONE)
    family: str    # key of the simulator implementation (symbol without the type)

    def symbol_for(self, type_name: str | None = None) -> str:
        if "{type}" in self.symbol:
            if type_name is None:
                raise ValueError(f"{self.op}: symbol {self.symbol} needs an element type")
            return self.symbol.format(type=type_name)
        return self.symbol


def _spec(op, symbol, effects, family=None):
    return OpSpec(op, symbol, effects, family or symbol.replace("_{type}", "").replace("{type}_", ""))


# dl.* (the distributed dialect) ---------------------------------------------------------
DL_OPS = {s.op: s for s in (
    _spec("rank", "aclshmem_my_pe", NONE),
    _spec("num_ranks", "aclshmem_n_pes", NONE),
    _spec("symm_at", "aclshmem_ptr_{type}", READ),
    # notify picks its symbol from the signal dtype: see notify_symbol().
    _spec("notify", "aclshmemx_signal_op", READ_WRITE),
    _spec("wait", "aclshmem_wait_{type}", READ),
    _spec("consume_token", "aclshmem_consume_token_{type}", NONE),
)}

# libshmem_device.* ----------------------------------------------------------------------
SHMEM_OPS = {s.op: s for s in (
    _spec("my_pe", "aclshmem_my_pe", NONE),
    _spec("n_pes", "aclshmem_n_pes", NONE),
    _spec("team_my_pe", "aclshmem_team_my_pe", NONE),
    _spec("team_n_pes", "aclshmem_team_n_pes", NONE),
    _spec("team_translate_pe", "aclshmem_team_translate_pe", NONE),
    # Typed like symm_at: the wrapper library defines only _mlir_ciface_aclshmem_ptr_<type>.
    _spec("remote_ptr", "aclshmem_ptr_{type}", READ_WRITE),
    _spec("int_p", "aclshmem_int32_p", READ_WRITE, "aclshmem_p"),
    _spec("int64_p", "aclshmem_int64_p", READ_WRITE, "aclshmem_p"),
    _spec("putmem", "aclshmem_{type}_putmem", READ_WRITE),
    _spec("getmem", "aclshmem_{type}_getmem", READ_WRITE),
    _spec("putmem_nbi", "aclshmem_{type}_putmem_nbi", READ_WRITE),
    _spec("getmem_nbi", "aclshmem_{type}_getmem_nbi", READ_WRITE),
    _spec("putmem_signal", "aclshmem_{type}_putmem_signal", READ_WRITE),
    _spec("putmem_signal_nbi", "aclshmem_{type}_putmem_signal_nbi", READ_WRITE),
    _spec("signal_op", "aclshmemx_signal_op", READ_WRITE),
    _spec("signal_wait_until", "aclshmem_signal_wait_until", READ_WRITE),
    _spec("barrier_all", "aclshmem_barrier_all", READ_WRITE),
    _spec("barrier_all_vec", "aclshmemx_barrier_all_vec", READ_WRITE),
    _spec("barrier", "aclshmem_barrier", READ_WRITE),
    _spec("barrier_vec", "aclshmemx_barrier_vec", READ_WRITE),
    _spec("quiet", "aclshmem_quiet", READ_WRITE),
    _spec("fence", "aclshmem_fence", READ_WRITE),
)}

# consume_token on a pointer of rank r calls aclshmem_consume_token_<type>_ptr_<r>d; the
# wrapper library instantiates r = 1..5 (Shmem.cpp, CONSUME_TOKEN_PTR_WRAPPER).
CONSUME_TOKEN_MAX_RANK = 5

# RMA symbols put the type in the middle (aclshmem_float_putmem); the prefix table names
# the untyped family, so core_type() is asked with the family for those.
RMA_OPS = ("putmem", "getmem", "putmem_nbi", "getmem_nbi", "putmem_signal", "putmem_signal_nbi")


def notify_symbol(signal_type: str, sig_op: str) -> str:
    """Symbol for dl.notify by signal dtype (docs/semantics.md §4, §6); raises on what Ascend forbids."""
    if sig_op not in SIG_OPS:
        raise ValueError(f"dl.notify: sig_op must be one of {sorted(SIG_OPS)}, got {sig_op!r}")
    if signal_type == "int32":
        return "aclshmemx_signal_op"
    if signal_type in ("int64", "uint64"):
        if sig_op != "set":
            raise ValueError(
                f"dl.notify: a {signal_type} signal allows sig_op='set' only on Ascend "
                f"(aclshmem_{signal_type}_p is a plain store); use an int32 signal for 'add'")
        return f"aclshmem_{signal_type}_p"
    raise ValueError(
        f"dl.notify: signal dtype {signal_type} is not allowed on Ascend: use int32 "
        f"(set or add) or int64/uint64 (set only)")


# --- dl.wait: which signals can be waited on (the one rule every backend applies) -------
# The wrapper library defines aclshmem_wait_<int8|int16|int32|int64> only (Shmem.cpp,
# ACLSHMEM_WAIT_WRAPPER): no float, half or bfloat16 wait, and no unsigned one.  Signals
# are 32- or 64-bit integers here (notify writes int32/int64/uint64, 64-byte slots); an
# unsigned signal is waited on by the signed wrapper of its width: the wait compares for
# equality (cmp 0 = EQ), which does not depend on the sign.
WAIT_SIGNAL_TYPES = {"int32": "int32", "int64": "int64", "uint32": "int32", "uint64": "int64"}


def wait_dtype_error(dtype_name: str) -> str:
    """The message every backend gives for a dl.wait on a signal it cannot wait on."""
    return (f"dl.wait: signals must be 32- or 64-bit integers ({', '.join(WAIT_SIGNAL_TYPES)}), got {dtype_name}: "
            f"the aclshmem device library waits on integer slots only (aclshmem_wait_int32/int64); "
            f"allocate the signal buffer as torch.int32 or torch.int64")


# The values a signal slot can hold, by dtype: a wait (or signal) value outside them would be
# truncated to the slot's width (2**32 on int32 -> 0: the wait returns with no signal).
INT_RANGES = {f"{s}int{b}": ((0, 2 ** b - 1) if s else (-2 ** (b - 1), 2 ** (b - 1) - 1))
              for s in ("", "u") for b in (8, 16, 32, 64)}


def value_fit_error(what: str, dtype_name: str, value) -> str | None:
    """The message every backend gives for a signal/wait value that does not fit the signal's
    dtype (None if it fits, or if the dtype is not an integer: other rules reject those)."""
    rng = INT_RANGES.get(dtype_name)
    if rng is None or isinstance(value, bool):
        return None
    if not isinstance(value, int):
        try:
            if float(value) != int(value):
                raise ValueError
            value = int(value)
        except (TypeError, ValueError, OverflowError):
            return f"{what} {value!r} is not an integer; the signal is {dtype_name}"
    lo, hi = rng
    if lo <= value <= hi:
        return None
    return (f"{what} {value} does not fit the signal's dtype {dtype_name} ({lo}..{hi}): it would be "
            f"truncated to {dtype_name}'s width and compare against another value; use a wider signal "
            f"(torch.int64) or a smaller value")


def wait_symbol(dtype_name: str) -> str:
    """Symbol of dl.wait on a signal of triton dtype `dtype_name`; ValueError if there is none."""
    if dtype_name not in WAIT_SIGNAL_TYPES:
        raise ValueError(wait_dtype_error(dtype_name))
    return DL_OPS["wait"].symbol_for(WAIT_SIGNAL_TYPES[dtype_name])


def _family_index():
    index = {}
    for spec in list(DL_OPS.values()) + list(SHMEM_OPS.values()):
        if "{type}" in spec.symbol:
            for t in TYPE_NAMES.values():
                index[spec.symbol_for(t)] = spec.family
                index[spec.symbol.replace("{type}", t) + "_ptr"] = spec.family
        else:
            index[spec.symbol] = spec.family
    index["aclshmem_uint64_p"] = "aclshmem_p"
    return index


FAMILY_OF = _family_index()


def family_of(symbol: str) -> str:
    """Simulator key of an aclshmem symbol: 'aclshmem_float_putmem' -> 'aclshmem_putmem'."""
    if symbol in FAMILY_OF:
        return FAMILY_OF[symbol]
    if symbol.startswith("aclshmem_consume_token_"):
        return "aclshmem_consume_token"
    return symbol


# --- element types as the lowering reads them from TTIR (docs/semantics.md §6) --------------------
# TTIR integers are signless, so an IR type names the signed type of its width; the one
# unsigned symbol (aclshmem_uint64_p) is chosen from the dtype the frontend recorded.
IR_TYPE_NAMES = {
    "bf16": "bfloat16", "f16": "half", "f32": "float",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
}
