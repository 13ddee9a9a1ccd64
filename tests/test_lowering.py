"""The HIVM lowering of the distributed ops (docs/semantics.md §6), checked on a CPU.

Why one long file: one golden check per op and form against docs/semantics.md §6, sharing one
reader of HIVM text; the cases read best side by side with the table they check.

Oracles: the symbol names, attributes and numbers written in docs/semantics.md §4 and §6
(and, for libshmem_device functions, the one symbol table the simulator is keyed by),
never the lowering's own output.  The HIVM ops are read back with a small parser
written here, independent of backend_ascend.
"""
import re

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.backend_ascend import lower
from triton_dist import symbols as S
from triton_dist.errors import TritonDistError

from hivm_forms import _split  # noqa: E402 - one bracket-aware comma splitter for both readers of HIVM text
from triton_dist.language.extra import libshmem_device as shm

# --- docs/semantics.md §6, written out -----------------------------------------------------------------
TYPE_NAMES = {"bf16": "bfloat16", "fp16": "half", "fp32": "float", "i8": "int8", "i16": "int16",
              "i32": "int32", "i64": "int64"}
IR_ELEM = {"bf16": "bf16", "fp16": "f16", "fp32": "f32", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64"}
ALWAYS = {"hivm.is_distributed": True, "hivm.pipe": "#hivm.pipe<PIPE_S>", "hivm.vf_mode": "#hivm.vf_mode<SIMD>"}
VECTOR, MIX = "#hivm.tcore_type<VECTOR>", "#hivm.tcore_type<CUBE_AND_VECTOR>"
ACLSHMEM_SIGNAL_SET, ACLSHMEM_SIGNAL_ADD = 0, 1


# --- reading the lowered module ---------------------------------------------------------------
_CUSTOM = re.compile(
    r'^\s*(?:(?P<res>%\S+) = )?hivm\.hir\.custom \{(?P<attrs>.*?)\} "(?P<name>[^"]+)"'
    r'(?: ins\((?P<ins>[^:]*) : (?P<ins_t>[^)]*)\))?'
    r'(?: outs\((?P<outs>[^:]*) : (?P<outs_t>[^)]*)\))?'
    r'(?: -> (?P<ret>\S+))?$')


def _attrs(body):
    attrs = {}
    for item in _split(body):
        key, eq, value = item.partition(" = ")
        attrs[key] = value.strip('"') if eq else True
    return attrs


def customs(text):
    ops = []
    for line in text.splitlines():
        if "hivm.hir.custom" not in line:
            continue
        m = _CUSTOM.match(line)
        assert m, f"unreadable custom op: {line}"
        ops.append(dict(
            res=m["res"], name=m["name"], attrs=_attrs(m["attrs"]),
            ins=_split(m["ins"]) if m["ins"] else [], ins_t=_split(m["ins_t"]) if m["ins_t"] else [],
            outs=m["outs"], outs_t=m["outs_t"], ret=m["ret"]))
    return ops


def defs(text):
    """SSA name -> the text after '=' of its defining line."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(%[\w$.\-]+) = (.*)$", line)
        if m:
            out[m[1]] = m[2]
    return out


def only(text, symbol):
    found = [op for op in customs(text) if op["attrs"].get("symbol") == f"{symbol}"]
    assert len(found) == 1, f"expected one {symbol}, found {len(found)} in:\n{text}"
    return found[0]


def check_common(op, symbol, *, core, pure, gm):
    assert op["name"] == "dist." + symbol
    for key, value in ALWAYS.items():
        assert op["attrs"].get(key) == value, (key, op)
    assert op["attrs"]["hivm.tcore_type"] == core, op
    assert op["attrs"]["symbol"] == symbol
    assert ("no_side_effect" in op["attrs"]) == pure, op
    want_gm = "array<i32" + (": " + ", ".join(map(str, gm)) if gm else "") + ">"
    assert op["attrs"]["gm_addr_args_indices"] == want_gm, op
    allowed = set(ALWAYS) | {"hivm.tcore_type", "symbol", "gm_addr_args_indices", "no_side_effect"}
    assert set(op["attrs"]) <= allowed, f"unexpected attributes {set(op['attrs']) - allowed}"


def no_carriers_left(text):
    assert "triton_dist.dist" not in text and "tt.extern_elementwise" not in text, text


# --- kernels --------------------------------------------------------------------------------------
@triton.jit
def k_ids(out):
    tl.store(out, dl.rank() * 100 + dl.num_ranks())


@triton.jit
def k_symm_at(p, peer):
    q = dl.symm_at(p, peer)
    tl.store(q, tl.load(p))


@triton.jit
def k_wait(sig, out):
    tok = dl.wait(sig, 4, "gpu", "acquire", waitValue=1)
    tl.store(out, tok)


@triton.jit
def k_wait_addptr(sig, out):
    tok = dl.wait(sig + 16, 2, "sys", "relaxed", waitValue=3)
    tl.store(out, tok)


@triton.jit
def k_consume_ptr(sig, buf):
    tok = dl.wait(sig, 1, "gpu", "acquire")
    p = dl.consume_token(buf, tok)
    tl.store(buf + 1, tl.load(p))


@triton.jit
def k_consume_block(sig, buf, N: tl.constexpr):
    tok = dl.wait(sig, 1, "gpu", "acquire")
    offs = tl.arange(0, N)
    p = dl.consume_token(buf + offs, tok)
    tl.store(buf + N + offs, tl.load(p))


@triton.jit
def k_consume_2d(sig, buf, N: tl.constexpr):
    tok = dl.wait(sig, 1, "gpu", "acquire")
    offs = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    p = dl.consume_token(buf + offs, tok)
    tl.store(buf + N * N + offs, tl.load(p))


@triton.jit
def k_consume_value(sig, out):
    tok = dl.wait(sig, 1, "gpu", "acquire")
    v = dl.consume_token(tl.load(out), tok)
    tl.store(out + 1, v)


@triton.jit
def k_notify(sig, peer, SIG_OP: tl.constexpr, SIGNAL: tl.constexpr):
    dl.notify(sig, peer, signal=SIGNAL, sig_op=SIG_OP)


@triton.jit
def k_notify_addptr(sig, peer):
    dl.notify(sig + 16, peer, signal=1, sig_op="add")


@triton.jit
def k_shm(a, b, sig, peer, N: tl.constexpr):
    nb = tl.cast(N * 4, tl.uint32)
    shm.putmem(a, b, nb, peer)
    shm.getmem(a + N, b, nb, peer)
    shm.putmem_nbi(a, b + N, nb, peer)
    shm.getmem_nbi(a, b, nb, peer)
    shm.putmem_signal(a, b, nb, sig, 1, shm.ACLSHMEM_SIGNAL_SET, peer)
    shm.putmem_signal_nbi(a, b, nb, sig + 16, 1, shm.ACLSHMEM_SIGNAL_ADD, peer)
    shm.barrier_all()
    shm.barrier_all_vec()
    shm.quiet()
    shm.fence()
    shm.barrier(shm.ACLSHMEM_TEAM_WORLD)
    shm.signal_op(sig, 1, shm.ACLSHMEM_SIGNAL_ADD, peer)
    v = shm.signal_wait_until(sig, shm.ACLSHMEM_CMP_GE, 1)
    tl.store(sig + 32, v + shm.my_pe() + shm.n_pes())


@triton.jit
def k_shm_python_ints(a, b, peer, N: tl.constexpr):
    shm.putmem(a, b, N * 4, peer)
    shm.int64_p(a, 5, peer)


@triton.jit
def k_sync_only(sig, peer):
    shm.barrier_all()
    shm.barrier_all_vec()
    shm.quiet()
    dl.notify(sig, peer)
    tl.store(sig + 32, shm.my_pe())


@triton.jit
def k_sync_dot(sig, peer, x, y, N: tl.constexpr):
    offs = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    z = tl.dot(tl.load(x + offs), tl.load(x + offs))
    tl.store(y + offs, z)
    shm.barrier_all()
    shm.barrier_all_vec()
    shm.quiet()
    dl.notify(sig, peer)
    tl.store(sig + 32, shm.my_pe())


@triton.jit
def k_putmem_dot(a, b, x, y, peer, N: tl.constexpr):
    offs = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(y + offs, tl.dot(tl.load(x + offs), tl.load(x + offs)))
    nb = tl.cast(N * 4, tl.uint32)
    shm.putmem(a, b, nb, peer)
    shm.getmem_nbi(a, b, nb, peer)


# --- dl ops x dtypes ----------------------------------------------------------------------------
def test_rank_and_num_ranks():
    text = lower(k_ids, {"out": "*i32"})
    no_carriers_left(text)
    for sym in ("aclshmem_my_pe", "aclshmem_n_pes"):
        op = only(text, sym)
        check_common(op, sym, core=VECTOR, pure=True, gm=[])
        assert op["ins"] == [] and op["ret"] == "i32"      # operands dropped


@pytest.mark.parametrize("dt", list(TYPE_NAMES))
def test_symm_at(dt):
    text = lower(k_symm_at, {"p": f"*{dt}", "peer": "i32"})
    no_carriers_left(text)
    sym = f"aclshmem_ptr_{TYPE_NAMES[dt]}"
    op = only(text, sym)
    check_common(op, sym, core=VECTOR, pure=False, gm=[0])
    assert op["ins"] == ["%arg0", "%arg1"] and op["ins_t"] == [f"!tt.ptr<{IR_ELEM[dt]}>", "i32"]
    assert op["ret"] == f"!tt.ptr<{IR_ELEM[dt]}>"


# AscendNPU-IR Shmem.cpp (ACLSHMEM_WAIT_WRAPPER) defines
#   int _mlir_ciface_aclshmem_wait_<int8..int64>(memref<TYPE> barrierPtr, int64_t numBarriers, TYPE waitVal)
# only: the slot count is int64, and an unsigned signal (signless in TTIR) takes the signed
# wrapper of its width.
@pytest.mark.parametrize("dt,sym,elem", [("i32", "aclshmem_wait_int32", "i32"), ("i64", "aclshmem_wait_int64", "i64"),
                                         ("u32", "aclshmem_wait_int32", "i32"), ("u64", "aclshmem_wait_int64", "i64")])
def test_wait(dt, sym, elem):
    text = lower(k_wait, {"sig": f"*{dt}", "out": "*i32"})
    no_carriers_left(text)
    op = only(text, sym)
    check_common(op, sym, core=VECTOR, pure=False, gm=[0])
    assert op["ret"] == "i32"
    assert op["ins_t"] == [f"!tt.ptr<{elem}>", "i64", elem]
    d = defs(text)
    m = re.fullmatch(r"arith\.extsi (%\S+) : i32 to i64", d[op["ins"][1]])
    assert m and d[m[1]] == "arith.constant 4 : i32"
    assert d[op["ins"][2]] == f"arith.constant 1 : {elem}"


WAIT_DTYPE_RULE = r"wait: signals must be 32- or 64-bit integers \(int32, int64, uint32, uint64\), got {}"


@pytest.mark.parametrize("dt,name", [("fp32", "fp32"), ("fp16", "fp16"), ("bf16", "bf16"), ("i8", "int8"),
                                     ("i16", "int16")])
def test_wait_on_other_signal_dtypes_is_refused(dt, name):
    """No aclshmem_wait_{float,half,bfloat16}: refused before any symbol is chosen."""
    with pytest.raises(TritonDistError, match=WAIT_DTYPE_RULE.format(name)):
        lower(k_wait, {"sig": f"*{dt}", "out": "*i32"})


def _wait_fp32():
    sig = triton_dist.symm_tensor((16,), torch.float32)
    out = triton_dist.symm_tensor((1,), torch.int32)
    k_wait[(1,)](sig, out)


def test_the_simulator_refuses_a_float_wait_with_the_same_message():
    with pytest.raises(triton_dist.RankError) as e:
        triton_dist.launch(_wait_fp32, world_size=1)
    assert re.search(WAIT_DTYPE_RULE.format("fp32"), str(e.value)), str(e.value)


def test_the_text_pass_refuses_a_float_wait_carrier():
    from triton_dist.backend_ascend.hivm import LoweringError, convert_text
    text = ('module {\n  tt.func public @k(%arg0: !tt.ptr<f32>) attributes {noinline = false} {\n'
            '    %c1_i32 = arith.constant 1 : i32\n    %cst = arith.constant 1.0 : f32\n'
            '    %0 = tt.extern_elementwise %arg0, %c1_i32, %cst {libname = "triton_dist.dist", libpath = "", '
            'pure = false, symbol = "triton_dist.wait", triton_dist.op = "wait"} : (!tt.ptr<f32>, i32, f32) -> i32\n'
            '    tt.return\n  }\n}\n')
    with pytest.raises(LoweringError, match=WAIT_DTYPE_RULE.format("float")):
        convert_text(text)


@triton.jit
def k_remote_ptr(p, peer):
    q = shm.remote_ptr(p, peer)
    tl.store(q, tl.load(p))


@pytest.mark.parametrize("dt", list(TYPE_NAMES))
def test_remote_ptr_is_the_typed_aclshmem_ptr(dt):
    """Shmem.cpp defines _mlir_ciface_aclshmem_ptr_<type> only (ACLSHMEM_PTR_WRAPPER), no untyped one."""
    text = lower(k_remote_ptr, {"p": f"*{dt}", "peer": "i32"})
    no_carriers_left(text)
    sym = f"aclshmem_ptr_{TYPE_NAMES[dt]}"
    op = only(text, sym)
    check_common(op, sym, core=VECTOR, pure=False, gm=[0])
    assert op["ins_t"] == [f"!tt.ptr<{IR_ELEM[dt]}>", "i32"] and op["ret"] == f"!tt.ptr<{IR_ELEM[dt]}>"
    assert "aclshmem_ptr\"" not in text


def test_remote_ptr_on_fp64_is_refused():
    with pytest.raises(TritonDistError, match=r"remote_ptr: no aclshmem_ptr_<type> for element type fp64"):
        lower(k_remote_ptr, {"p": "*fp64", "peer": "i32"})


@triton.jit
def k_consume_6d(sig, buf):
    tok = dl.wait(sig, 1, "gpu", "acquire")
    p = buf + tl.arange(0, 2).reshape(2, 1, 1, 1, 1, 1)
    p = dl.consume_token(p, tok)
    tl.store(buf + 2 + tl.arange(0, 2).reshape(2, 1, 1, 1, 1, 1), tl.load(p))


def test_consume_token_of_pointers_beyond_rank_5_is_refused():
    """CONSUME_TOKEN_PTR_WRAPPER instantiates _ptr_1d .. _ptr_5d."""
    with pytest.raises(TritonDistError, match=r"rank 6 .* r = 1\.\.5 only"):
        lower(k_consume_6d, {"sig": "*i32", "buf": "*fp32"})


@pytest.mark.parametrize("dt", ["fp32", "bf16", "i8"])
def test_consume_token_of_pointers(dt):
    sym = f"aclshmem_consume_token_{TYPE_NAMES[dt]}_ptr_1d"
    for kernel, consts in ((k_consume_ptr, {}), (k_consume_block, {"N": 16})):
        text = lower(kernel, {"sig": "*i32", "buf": f"*{dt}"}, consts)
        no_carriers_left(text)
        check_common(only(text, sym), sym, core=VECTOR, pure=True,
                     gm=[0] if kernel is k_consume_ptr else [])


def test_consume_token_tensor_result_gets_tensor_empty():
    text = lower(k_consume_2d, {"sig": "*i32", "buf": "*fp16"}, {"N": 16})
    sym = "aclshmem_consume_token_half_ptr_2d"
    op = only(text, sym)
    check_common(op, sym, core=VECTOR, pure=True, gm=[])     # a tensor of pointers is no GM address arg
    ty = "tensor<16x16x!tt.ptr<f16>>"
    assert op["ret"] == ty and op["outs_t"] == ty
    assert defs(text)[op["outs"]] == f"tensor.empty() : {ty}"


def test_consume_token_of_a_scalar_value():
    text = lower(k_consume_value, {"sig": "*i32", "out": "*i32"})
    op = only(text, "aclshmem_consume_token_int32")
    check_common(op, "aclshmem_consume_token_int32", core=VECTOR, pure=True, gm=[])
    assert op["ret"] == "i32" and op["outs"] is None


@pytest.mark.parametrize("sig_op,code", [("set", ACLSHMEM_SIGNAL_SET), ("add", ACLSHMEM_SIGNAL_ADD)])
def test_notify_int32_is_signal_op(sig_op, code):
    text = lower(k_notify, {"sig": "*i32", "peer": "i32"}, {"SIG_OP": sig_op, "SIGNAL": 5})
    no_carriers_left(text)
    op = only(text, "aclshmemx_signal_op")
    check_common(op, "aclshmemx_signal_op", core=VECTOR, pure=False, gm=[0])
    assert op["ret"] is None and op["res"] is None                   # no result
    sig, signal, sigop, rank = op["ins"]                             # (sig, signal as i32, op, rank)
    assert (sig, rank) == ("%arg0", "%arg1")
    assert op["ins_t"] == ["!tt.ptr<i32>", "i32", "i32", "i32"]
    d = defs(text)
    assert d[sigop] == f"arith.constant {code} : i32"
    m = re.fullmatch(r"arith\.trunci (%\S+) : i64 to i32", d[signal])
    assert m and d[m[1]] == "arith.constant 5 : i64"


@pytest.mark.parametrize("dt,sym", [("i64", "aclshmem_int64_p"), ("u64", "aclshmem_uint64_p")])
def test_notify_64bit_is_p(dt, sym):
    text = lower(k_notify, {"sig": f"*{dt}", "peer": "i32"}, {"SIG_OP": "set", "SIGNAL": 7})
    no_carriers_left(text)
    op = only(text, sym)
    check_common(op, sym, core=VECTOR, pure=False, gm=[0])
    assert op["ins"][0] == "%arg0" and op["ins"][2] == "%arg1"
    assert op["ins_t"] == ["!tt.ptr<i64>", "i64", "i32"]
    assert defs(text)[op["ins"][1]] == "arith.constant 7 : i64"


@pytest.mark.parametrize("dt", ["i64", "u64"])
def test_notify_add_on_64bit_is_an_error(dt):
    with pytest.raises(TritonDistError, match=r"allows sig_op='set' only.*int32 signal for 'add'"):
        lower(k_notify, {"sig": f"*{dt}", "peer": "i32"}, {"SIG_OP": "add", "SIGNAL": 1})


@pytest.mark.parametrize("dt", ["fp32", "i16", "i8", "bf16"])
def test_notify_other_dtypes_are_errors(dt):
    with pytest.raises(TritonDistError, match=r"not allowed on Ascend: use int32 .*int64/uint64"):
        lower(k_notify, {"sig": f"*{dt}", "peer": "i32"}, {"SIG_OP": "set", "SIGNAL": 1})


# --- libshmem_device: symbols, core types, effects ----------------------------------------------
def _table_symbol(op, dtype=None):
    return S.SHMEM_OPS[op].symbol_for(dtype)


def test_libshmem_device_symbols_and_prefix_core_types():
    text = lower(k_shm, {"a": "*fp32", "b": "*fp32", "sig": "*i32", "peer": "i32"}, {"N": 16})
    no_carriers_left(text)
    # RMA: VECTOR from the prefix table.  gm: dest and source when they are kernel args.
    gms = {"putmem": [0, 1], "getmem": [1], "putmem_nbi": [0], "getmem_nbi": [0, 1],
           "putmem_signal": [0, 1, 3], "putmem_signal_nbi": [0, 1]}
    for op, gm in gms.items():
        sym = _table_symbol(op, "float")
        check_common(only(text, sym), sym, core=VECTOR, pure=False, gm=gm)
    check_common(only(text, "aclshmem_barrier_all"), "aclshmem_barrier_all", core=MIX, pure=False, gm=[])
    check_common(only(text, "aclshmemx_barrier_all_vec"), "aclshmemx_barrier_all_vec", core=VECTOR,
                 pure=False, gm=[])
    for op in ("quiet", "fence", "barrier", "signal_op", "signal_wait_until"):
        sym = _table_symbol(op)
        check_common(only(text, sym), sym, core=VECTOR, pure=False, gm=[0] if "signal" in op else [])
    for op in ("my_pe", "n_pes"):
        sym = _table_symbol(op)
        check_common(only(text, sym), sym, core=VECTOR, pure=True, gm=[])
    # signal_op keeps the device-library numbering: ADD = 1
    op = only(text, "aclshmemx_signal_op")
    assert defs(text)[op["ins"][2]].startswith(f"arith.constant {ACLSHMEM_SIGNAL_ADD} ")
    # void ops have no result, value-returning ones keep theirs
    assert only(text, "aclshmem_barrier_all")["ret"] is None
    assert only(text, "aclshmem_signal_wait_until")["ret"] == "i32"


def test_libshmem_device_takes_python_ints_when_compiled():
    text = lower(k_shm_python_ints, {"a": "*i64", "b": "*i64", "peer": "i32"}, {"N": 16})
    assert only(text, _table_symbol("putmem", "int64")) and only(text, "aclshmem_int64_p")


def test_every_symbol_is_a_simulator_primitive():
    """What the NPU would link is, name for name, what the simulator runs."""
    from triton_dist.sim import primitives
    text = lower(k_shm, {"a": "*fp32", "b": "*fp32", "sig": "*i32", "peer": "i32"}, {"N": 16})
    text += lower(k_consume_block, {"sig": "*i32", "buf": "*fp32"}, {"N": 16})
    text += lower(k_symm_at, {"p": "*fp32", "peer": "i32"}) + lower(k_ids, {"out": "*i32"})
    for op in customs(text):
        assert S.family_of(op["attrs"]["symbol"]) in primitives.PRIMITIVES, op["attrs"]["symbol"]


def test_core_type_without_dot():
    text = lower(k_sync_only, {"sig": "*i32", "peer": "i32"})
    assert only(text, "aclshmem_barrier_all")["attrs"]["hivm.tcore_type"] == MIX
    assert only(text, "aclshmemx_barrier_all_vec")["attrs"]["hivm.tcore_type"] == VECTOR
    for sym in ("aclshmem_quiet", "aclshmemx_signal_op", "aclshmem_my_pe"):
        assert only(text, sym)["attrs"]["hivm.tcore_type"] == VECTOR, sym


def test_core_type_with_dot():
    text = lower(k_sync_dot, {"sig": "*i32", "peer": "i32", "x": "*fp32", "y": "*fp32"}, {"N": 16})
    assert re.search(r"= tt\.dot ", text)
    assert only(text, "aclshmem_barrier_all")["attrs"]["hivm.tcore_type"] == MIX
    assert only(text, "aclshmemx_barrier_all_vec")["attrs"]["hivm.tcore_type"] == VECTOR   # prefix first
    for sym in ("aclshmem_quiet", "aclshmemx_signal_op", "aclshmem_my_pe"):
        assert only(text, sym)["attrs"]["hivm.tcore_type"] == MIX, sym


def test_rma_stays_vector_with_dot():
    text = lower(k_putmem_dot, {"a": "*fp32", "b": "*fp32", "x": "*fp32", "y": "*fp32", "peer": "i32"},
                 {"N": 16})
    for op in ("putmem", "getmem_nbi"):
        assert only(text, _table_symbol(op, "float"))["attrs"]["hivm.tcore_type"] == VECTOR


# --- gm_addr_args_indices -----------------------------------------------------------------------
def test_gm_addr_args_entry_arg_vs_addptr():
    entry = lower(k_notify, {"sig": "*i32", "peer": "i32"}, {"SIG_OP": "set", "SIGNAL": 1})
    shifted = lower(k_notify_addptr, {"sig": "*i32", "peer": "i32"})
    assert only(entry, "aclshmemx_signal_op")["attrs"]["gm_addr_args_indices"] == "array<i32: 0>"
    op = only(shifted, "aclshmemx_signal_op")
    assert op["attrs"]["gm_addr_args_indices"] == "array<i32>"
    assert defs(shifted)[op["ins"][0]].startswith("tt.addptr %arg0")
    w = only(lower(k_wait_addptr, {"sig": "*i32", "out": "*i32"}), "aclshmem_wait_int32")
    assert w["attrs"]["gm_addr_args_indices"] == "array<i32>"


@triton.jit
def _notify_helper(p, peer):
    dl.notify(p, peer, signal=2, sig_op="add")


@triton.jit
def k_via_helper(sig, peer):
    _notify_helper(sig, peer)                 # the helper's arg is the kernel's arg once inlined
    _notify_helper(sig + 16, peer + 1)


def test_gm_addr_args_through_an_inlined_helper():
    text = lower(k_via_helper, {"sig": "*i32", "peer": "i32"})
    gms = sorted(op["attrs"]["gm_addr_args_indices"] for op in customs(text))
    assert gms == ["array<i32: 0>", "array<i32>"]


@triton.jit(noinline=True)
def _notify_not_inlined(p, peer):
    dl.notify(p, peer, signal=1, sig_op="set")


@triton.jit
def k_via_call(sig, peer):
    _notify_not_inlined(sig + 16, peer)


def test_gm_addr_args_refer_to_the_enclosing_function():
    text = lower(k_via_call, {"sig": "*i32", "peer": "i32"})
    assert re.search(r"tt\.call @\S*_notify_not_inlined", text)
    op = only(text, "aclshmemx_signal_op")
    assert op["ins"][0] == "%arg0"              # the callee's own argument: a GM address of that function
    assert op["attrs"]["gm_addr_args_indices"] == "array<i32: 0>"


# --- the rest of the IR is left alone -----------------------------------------------------------
@triton.jit
def allgather_kernel(buf, out, sig, N: tl.constexpr):
    """AllGather over the symmetric heap: every rank puts its block into everyone's `out`."""
    me = dl.rank()
    n = dl.num_ranks()
    offs = tl.arange(0, N)
    data = tl.load(buf + offs)
    for peer in range(n):
        remote = dl.symm_at(out, peer)
        tl.store(remote + me * N + offs, data)
        shm.fence()                           # the block store (a DMA) before the signal
        dl.notify(sig + me * 16, peer, signal=1, sig_op="set")
    tok = dl.wait(sig, n, "gpu", "acquire", waitValue=1)
    src = dl.consume_token(out, tok)
    for i in range(n):
        tl.store(buf + N + i * N + offs, tl.load(src + i * N + offs))
    shm.barrier_all()


def _ordered_subsequence(needles, haystack):
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def test_whole_kernel_lowering_changes_only_the_distributed_ops():
    from triton_dist.backend_ascend.frontend import build_ttir
    sig = {"buf": "*fp32", "out": "*fp32", "sig": "*i32"}
    module, _ = build_ttir(allgather_kernel, sig, {"N": 16})
    before = module.str_nodebug().splitlines()
    after = lower(allgather_kernel, sig, {"N": 16}).splitlines()
    no_carriers_left("\n".join(after))
    kept = [line for line in before if "tt.extern_elementwise" not in line]
    assert _ordered_subsequence(kept, after)                       # every other line, unchanged, in order
    added = [line for line in after if line not in kept]
    n_carriers = sum("tt.extern_elementwise" in line for line in before)
    assert sum("hivm.hir.custom" in line for line in added) == n_carriers
    for line in added:                                            # and nothing else but their helpers
        assert "hivm.hir.custom" in line or re.match(r"^\s*%dist_\w+ = (arith\.constant|arith\.trunci|arith\.extsi|"
                                                     r"tensor\.empty)", line), line
    names = {op["attrs"]["symbol"] for op in customs("\n".join(after))}
    assert names == {"aclshmem_my_pe", "aclshmem_n_pes", "aclshmem_ptr_float", "aclshmemx_signal_op",
                     "aclshmem_wait_int32", "aclshmem_consume_token_float_ptr_1d", "aclshmem_barrier_all",
                     "aclshmem_fence"}


def _allgather(N):
    r, w = triton_dist.rank(), triton_dist.world_size()
    buf = triton_dist.symm_tensor(((w + 1) * N,), torch.float32)
    buf[:N] = torch.arange(N, dtype=torch.float32) + 100 * r
    out = triton_dist.symm_tensor((w * N,), torch.float32)
    sig = triton_dist.symm_tensor((w * 16,), torch.int32)
    triton_dist.barrier()
    allgather_kernel[(1,)](buf, out, sig, N=N)
    return buf[N:].tolist()


def test_the_simulator_runs_the_kernel_it_lowered():
    """Lowering traces the kernel with Triton's compiler; the simulator must not notice."""
    lower(allgather_kernel, {"buf": "*fp32", "out": "*fp32", "sig": "*i32"}, {"N": 8})
    res = triton_dist.launch(_allgather, 8, world_size=2)
    want = [float(100 * r + i) for r in range(2) for i in range(8)]
    assert res.values == [want, want]


def test_lowering_a_plain_jit_function():
    from triton.runtime.jit import JITFunction
    jit = JITFunction(k_ids.fn)
    assert only(lower(jit, {"out": "*i32"}), "aclshmem_my_pe")
    assert only(lower(k_ids.fn, {"out": "*i32"}), "aclshmem_n_pes")


def test_kernel_without_distributed_ops_is_unchanged():
    @triton.jit
    def plain(x, N: tl.constexpr):
        tl.store(x + tl.arange(0, N), tl.load(x + tl.arange(0, N)) + 1)

    from triton_dist.backend_ascend.frontend import build_ttir
    module, _ = build_ttir(plain, {"x": "*fp32"}, {"N": 8})
    assert lower(plain, {"x": "*fp32"}, {"N": 8}) == module.str_nodebug()


def test_debug_info_keeps_locations():
    text = lower(k_ids, {"out": "*i32"}, debug_info=True)
    op_line = next(line for line in text.splitlines() if "aclshmem_my_pe" in line)
    assert re.search(r"-> i32 loc\(#loc\d*\)$", op_line)
    assert customs("\n".join(re.sub(r" loc\(.*\)$", "", line) for line in text.splitlines()))


# --- bad input ----------------------------------------------------------------------------------
def test_signature_errors_say_what_to_do():
    with pytest.raises(TritonDistError, match=r"no type for parameter 'peer'.*peer=\*fp32"):
        lower(k_symm_at, {"p": "*fp32"})
    with pytest.raises(TritonDistError, match=r"unknown Triton type '\*f32'"):
        lower(k_symm_at, {"p": "*f32", "peer": "i32"})
    with pytest.raises(TritonDistError, match=r"has no parameter\(s\) 'q'"):
        lower(k_symm_at, {"p": "*fp32", "peer": "i32", "q": "i32"})
    with pytest.raises(TritonDistError, match=r"'N' .* is a tl.constexpr; give its value"):
        lower(k_consume_block, {"sig": "*i32", "buf": "*fp32"})
    with pytest.raises(TritonDistError, match=r"expected a @triton.jit kernel"):
        lower(42, {})


def test_unsupported_element_type_is_an_error():
    with pytest.raises(TritonDistError, match=r"no symbol for element type f64"):
        lower(k_symm_at, {"p": "*fp64", "peer": "i32"})


def test_text_pass_checks_the_carrier():
    from triton_dist.backend_ascend.hivm import LoweringError, convert_text
    head = 'module {\n  tt.func public @k(%arg0: !tt.ptr<i64>, %arg1: i32) attributes {noinline = false} {\n'
    tail = '    tt.return\n  }\n}\n'

    def carrier(op, extra=""):
        return (f'    %c1_i64 = arith.constant 1 : i64\n    %0 = tt.extern_elementwise %arg0, %arg1, %c1_i64 '
                f'{{libname = "triton_dist.dist", libpath = "", pure = false, symbol = "triton_dist.{op}", '
                f'triton_dist.op = "{op}"{extra}, triton_dist.void}} : (!tt.ptr<i64>, i32, i64) -> i32\n')

    with pytest.raises(LoweringError, match="unknown distributed op 'teleport'"):
        convert_text(head + carrier("teleport") + tail)
    with pytest.raises(LoweringError, match=r"allows sig_op='set' only"):
        convert_text(head + carrier("notify", ', triton_dist.sig_op = "add", triton_dist.signal_dtype = "int64"')
                     + tail)
    text, n = convert_text(head + carrier("notify", ', triton_dist.sig_op = "set", '
                                                     'triton_dist.signal_dtype = "uint64"') + tail)
    assert n == 1 and only(text, "aclshmem_uint64_p")
    # another library's extern_elementwise is not ours: left alone
    other = head + ('    %0 = tt.extern_elementwise %arg1 {libname = "libdevice", libpath = "", pure = true, '
                    'symbol = "__nv_abs"} : (i32) -> i32\n') + tail
    assert convert_text(other) == (other, 0)


# --- the CLI ----------------------------------------------------------------------------------------
KERNEL_FILE = '''
import triton
import triton.language as tl
import triton_dist.language as dl


@triton.jit
def put_flag(sig, buf, N: tl.constexpr):
    tl.store(dl.symm_at(buf, 1) + tl.arange(0, N), tl.load(buf + tl.arange(0, N)))
    dl.notify(sig, 1, signal=1, sig_op="add")
'''


def test_cli_lower(tmp_path, capsys):
    from triton_dist.cli import main
    f = tmp_path / "kern.py"
    f.write_text(KERNEL_FILE)
    assert main(["lower", f"{f}::put_flag", "--signature", "sig=*i32,buf=*bf16", "--constexpr", "N=16"]) == 0
    out = capsys.readouterr().out
    no_carriers_left(out)
    assert only(out, "aclshmem_ptr_bfloat16")["attrs"]["gm_addr_args_indices"] == "array<i32: 0>"
    assert only(out, "aclshmemx_signal_op")


@pytest.mark.parametrize("argv,msg", [
    (["lower", "{f}", "-s", "sig=*i32"], "expected FILE.py::NAME"),
    (["lower", "{f}::nope", "-s", "sig=*i32"], "defines no 'nope'; kernels in it: put_flag"),
    (["lower", "{d}/missing.py::k", "-s", "sig=*i32"], "no such file"),
    (["lower", "{f}::put_flag", "-s", "sig=*i32,buf"], "expected NAME=VALUE"),
    (["lower", "{f}::put_flag", "-s", "sig=*i32,buf=*fp32"], "is a tl.constexpr; give its value"),
    (["lower", "{f}::put_flag", "-s", "sig=*i32,buf=*xx", "-c", "N=16"], "unknown Triton type"),
    (["lower", "{f}::put_flag", "-s", "sig=*i64,buf=*fp32", "-c", "N=16"], "allows sig_op='set' only"),
    (["lower", "{f}::put_flag"], "required"),
    (["frobnicate"], "invalid choice"),
])
def test_cli_errors_are_short(tmp_path, capsys, argv, msg):
    from triton_dist.cli import main
    f = tmp_path / "kern.py"
    f.write_text(KERNEL_FILE)
    argv = [a.format(f=f, d=tmp_path) for a in argv]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


# --- kernels the simulator runs lower too ----------------------------------------------------------
@triton.jit
def k_stdlib_and_small_dot(sig, x, y, N: tl.constexpr, K: tl.constexpr):
    """tl.sum (triton.language's own @jit, interpreted while the simulator is active) and a
    dot with K < 16, which triton-ascend allows (its min_dot_size is (1, 1, 1))."""
    tok = dl.wait(sig, 1, "gpu", "acquire")
    rows = tl.arange(0, N)[:, None]
    a = tl.load(dl.consume_token(x, tok) + rows * K + tl.arange(0, K)[None, :])
    b = tl.load(x + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    c = tl.dot(a, b)
    tl.store(y + rows * N + tl.arange(0, N)[None, :], c)
    tl.store(y, tl.sum(tl.sum(c, axis=1), axis=0))


def test_kernels_with_triton_stdlib_helpers_and_small_dots_lower():
    text = lower(k_stdlib_and_small_dot, {"sig": "*i32", "x": "*fp32", "y": "*fp32"}, {"N": 16, "K": 8})
    no_carriers_left(text)
    assert re.search(r"= tt\.dot ", text) and "tt.reduce" in text
    assert only(text, "aclshmem_wait_int32")["attrs"]["hivm.tcore_type"] == MIX
