"""Every aclshmem symbol the Ascend lowering or the CUDA device library can emit exists.

Oracle: tests/data/aclshmem_wrappers.txt, the _mlir_ciface_* wrappers AscendNPU-IR's
template library defines (bishengir/lib/Template/lib/Shmem/Shmem.cpp, the commit named in
the file's header), written out from the source.  A kernel calling a symbol outside that
list would not link on an NPU, so a new symbol not in it fails here.  What "can emit"
means: every op x element type x core type of tests/hivm_forms.py, lowered for the NPU and
traced for CUDA, plus every symbol triton_dist/symbols.py can name for them.
"""
import os
import re

import pytest

import hivm_forms as H
from triton_dist import symbols as S

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "aclshmem_wrappers.txt")


def _wrappers():
    header, names = [], {}
    for line in open(DATA):
        if line.startswith("#"):
            header.append(line)
        elif line.strip():
            name, where = line.split()[:2]
            names[name] = int(where)
    return "".join(header), names


HEADER, WRAPPERS = _wrappers()


def test_the_list_names_its_source():
    assert "bishengir/lib/Template/lib/Shmem/Shmem.cpp" in HEADER
    assert re.search(r"commit:\s+[0-9a-f]{40}", HEADER)
    assert len(WRAPPERS) == 169 and all(0 < line <= 405 for line in WRAPPERS.values())


def test_the_list_has_what_the_issue_reports_of_the_source():
    """Spot checks of the facts the fixes rest on (read in Shmem.cpp): no untyped aclshmem_ptr,
    waits for int8..int64 only, typed aclshmem_ptr_<type>."""
    assert "aclshmem_ptr" not in WRAPPERS
    assert {n for n in WRAPPERS if n.startswith("aclshmem_wait_") and "until" not in n} == {
        "aclshmem_wait_int8", "aclshmem_wait_int16", "aclshmem_wait_int32", "aclshmem_wait_int64"}
    assert {"aclshmem_ptr_float", "aclshmem_ptr_half", "aclshmem_ptr_bfloat16", "aclshmem_ptr_int32"} <= set(WRAPPERS)


# --- what the lowering emits --------------------------------------------------------------------------------
GRID = H.grid()


def _customs(text):
    return set(re.findall(r'hivm\.hir\.custom \{[^}]*symbol = "([\w$.]+)"\} "dist\.([\w$.]+)"', text))


@pytest.mark.parametrize("case", GRID, ids=[c[0] for c in GRID])
def test_every_symbol_the_lowering_emits_is_a_wrapper(case):
    cid, fn, sig, consts = case
    found = set()
    for has_dot in H.CORE_TYPES.values():
        for symbol, name in _customs(H.lower_npu(fn, sig, {**consts, "DOT": has_dot})):
            assert name == symbol
            found.add(symbol)
    assert found
    missing = sorted(found - set(WRAPPERS))
    assert not missing, f"{cid}: the lowering emits symbols AscendNPU-IR's Shmem.cpp does not define: {missing}"


def test_every_symbol_the_table_can_name_is_a_wrapper():
    """The table itself (triton_dist/symbols.py), for every element type it names."""
    names = set()
    ir_types = set(S.IR_TYPE_NAMES.values())               # what the lowering reads from TTIR
    for spec in list(S.DL_OPS.values()) + list(S.SHMEM_OPS.values()):
        if spec.op in ("wait", "notify", "consume_token"):
            continue                                        # chosen by their own rules, below
        if "{type}" in spec.symbol:
            types = S.TYPE_NAMES.values() if spec.op in S.RMA_OPS + ("remote_ptr",) else ir_types
            names |= {spec.symbol_for(t) for t in types}
        else:
            names.add(spec.symbol)
    names |= {S.notify_symbol(t, "set") for t in ("int32", "int64", "uint64")} | {S.notify_symbol("int32", "add")}
    names |= {S.wait_symbol(t) for t in S.WAIT_SIGNAL_TYPES}
    consume = S.DL_OPS["consume_token"]
    names |= {consume.symbol_for(t) for t in ir_types}
    names |= {consume.symbol_for(f"{t}_ptr_{r}d") for t in ir_types for r in range(1, S.CONSUME_TOKEN_MAX_RANK + 1)}
    missing = sorted(names - set(WRAPPERS))
    assert not missing, f"triton_dist/symbols.py names symbols Shmem.cpp does not define: {missing}"


# --- what the CUDA device library is asked for -----------------------------------------------------------------
def _cuda_calls(text):
    return set(re.findall(r'libname = "triton_dist_cuda", libpath = "[^"]*", pure = \w+, symbol = "([\w$.]+)"', text))


@pytest.mark.parametrize("case", GRID, ids=[c[0] for c in GRID])
def test_every_symbol_a_cuda_kernel_calls_is_a_wrapper(case):
    """backend 'cuda' compiles the same kernels into calls of the same symbols (its device
    library defines them for GPUs): a kernel checked on GPUs must link on an NPU too."""
    pytest.importorskip("llvmlite", reason="backend 'cuda' assembles its device library with llvmlite")
    from triton_dist.backend_ascend.frontend import build_ttir
    from triton_dist.backend_cuda import devlib
    cid, fn, sig, consts = case
    module, _ = build_ttir(fn, sig, {**consts, "DOT": False}, extern_libs={devlib.LIBNAME: "/unused.bc"})
    calls = _cuda_calls(module.str_nodebug())
    assert calls or cid.startswith("consume"), f"{cid}: no device-library call in the CUDA kernel"
    missing = sorted(calls - set(WRAPPERS))
    assert not missing, f"{cid}: CUDA kernels call symbols AscendNPU-IR's Shmem.cpp does not define: {missing}"
    assert calls <= devlib.SYMBOLS
