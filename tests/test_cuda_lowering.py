"""backend "cuda" on the CPU: the device library assembles, defines every aclshmem symbol a
kernel can call, and every kernel (the conformance kernels and the library's) compiles for
an H100/H200 (sm_90) down to a cubin, calling the symbols docs/semantics.md §6 names.

Compilation needs no GPU (Triton ships ptxas); it runs in a child process started with
TRITON_DIST_BACKEND=cuda, because this test process interprets kernels for the simulator.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from triton_dist import symbols as S

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytest.importorskip("llvmlite", reason="backend 'cuda' assembles its device library with llvmlite")


def test_device_library_defines_every_symbol_a_kernel_can_call():
    from triton_dist.backend_cuda import devlib
    want = set()
    for spec in S.SHMEM_OPS.values():
        if spec.op in S.RMA_OPS:
            want |= {spec.symbol_for(t) for t in S.TYPE_NAMES.values()}
        elif "{type}" not in spec.symbol:
            want.add(spec.symbol)
    want |= {S.DL_OPS["symm_at"].symbol_for(t) for t in S.TYPE_NAMES.values()}
    want |= {S.notify_symbol("int32", "set"), S.notify_symbol("int64", "set"), S.notify_symbol("uint64", "set")}
    want |= {"aclshmem_wait_int32", "aclshmem_wait_int64"}
    assert want <= devlib.SYMBOLS, sorted(want - devlib.SYMBOLS)


def test_device_library_assembles(tmp_path, monkeypatch):
    import llvmlite.binding as llvm
    from triton_dist.backend_cuda import devlib
    monkeypatch.setenv("TRITON_DIST_CACHE_DIR", str(tmp_path))
    path = devlib.bitcode_path()
    assert os.path.getsize(path) > 1000
    mod = llvm.parse_bitcode(open(path, "rb").read())
    names = {f.name for f in mod.functions}
    assert devlib.SYMBOLS <= names
    assert devlib.bitcode_path() == path          # built once per content


CHILD = textwrap.dedent(r"""
    import json, os, sys
    os.environ["TRITON_DIST_BACKEND"] = "cuda"
    sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import triton_dist
    from triton_dist.backend_cuda import devlib, loader
    loader.link_device_library()
    import test_primitives as P
    from triton_dist.kernels import collectives as C, gemm as G
    # what Triton's JIT specializes for 16-aligned pointers and sizes that are multiples of 16
    div16 = lambda sig: {(i,): [["tt.divisibility", 16]] for i, (n, t) in enumerate(sig.items())
                         if t.startswith("*") or n in ("m", "N", "K")}
    cases = {
        "ids": (P.ids_kernel, {"out": "*i32"}, {}),
        "notify_wait": (P.notify_wait_kernel, {"data": "*fp32", "sig": "*i32", "out": "*fp32", "N": "constexpr",
                         "STRIDE": "constexpr"}, {"N": 8, "STRIDE": 16}),
        "signal_add": (P.add_kernel, {"sig": "*i32", "out": "*i32"}, {}),
        "put_get": (P.put_get_kernel, {"src": "*fp32", "dst_put": "*fp32", "dst_get": "*fp32", "sig": "*i32",
                     "N": "constexpr"}, {"N": 64}),
        "int_p": (P.int_p_kernel, {"dst": "*i32", "dst64": "*i64"}, {}),
        "barrier": (P.barrier_rounds_kernel, {"buf": "*i32", "out": "*i32", "ROUNDS": "constexpr"}, {"ROUNDS": 2}),
        "gather": (C._gather_kernel, dict(x="*bf16", ws="*bf16", sig="*i32", out="*bf16", E="i32", PART="i32",
                   epoch="i32", SCATTER="constexpr", ES="constexpr", BLOCK="constexpr"),
                   dict(SCATTER=False, ES=2, BLOCK=1024)),
        "ring": (C._ring_kernel, dict(x="*fp32", ws="*fp32", sig="*i32", out="*fp32", E="i32", CH="i32",
                 PART="i32", epoch="i32", BLOCK="constexpr"), dict(BLOCK=1024)),
        "ag_gemm": (G._ag_gemm_kernel, dict(a="*bf16", b="*bf16", ws="*bf16", sig="*i32", out="*bf16", m="i32",
                    N="i32", K="i32", T="i32", epoch="i32", NP="constexpr", BM="constexpr", BN="constexpr",
                    BK="constexpr", ES="constexpr", UPCAST="constexpr", PREC="constexpr", GM="constexpr"),
                    dict(NP=2, BM=128, BN=256, BK=64, ES=2, UPCAST=False, PREC="tf32", GM=8)),
    }
    out = {}
    for name, (fn, sig, consts) in cases.items():
        opts = dict(num_warps=8, num_stages=3) if name == "ag_gemm" else {}
        k = triton.compile(ASTSource(fn, sig, consts, div16(sig)), target=GPUTarget("cuda", 90, 32), options=opts)
        out[name] = dict(ttir=k.asm["ttir"], ptx=k.asm["ptx"], cubin=len(k.asm["cubin"]))
    json.dump(out, sys.stdout)
""")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    env = dict(os.environ, TRITON_DIST_BACKEND="cuda", TRITON_CACHE_DIR=str(tmp_path_factory.mktemp("triton")),
               TRITON_DIST_CACHE_DIR=str(tmp_path_factory.mktemp("devlib")))
    env.pop("TRITON_INTERPRET", None)          # the simulator's setting; this child compiles
    proc = subprocess.run([sys.executable, "-c", f"ROOT = {ROOT!r}\n" + CHILD], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def _symbols(ttir):
    import re
    return set(re.findall(r'symbol = "([\w.]+)"', ttir))


@pytest.mark.parametrize("name,symbols", [
    ("ids", {"aclshmem_my_pe", "aclshmem_n_pes", "aclshmem_team_my_pe", "aclshmem_team_n_pes"}),
    ("notify_wait", {"aclshmem_my_pe", "aclshmem_n_pes", "aclshmem_ptr_float", "aclshmemx_signal_op",
                     "aclshmem_wait_int32"}),
    ("signal_add", {"aclshmem_n_pes", "aclshmem_my_pe", "aclshmemx_signal_op", "aclshmem_wait_int32"}),
    ("put_get", {"aclshmem_float_putmem_signal", "aclshmem_float_getmem", "aclshmem_signal_wait_until"}),
    ("int_p", {"aclshmem_int32_p", "aclshmem_int64_p", "aclshmem_barrier_all"}),
    ("barrier", {"aclshmem_barrier_all", "aclshmem_ptr_int32"}),
    ("gather", {"aclshmem_bfloat16_putmem_signal", "aclshmem_wait_int32"}),
    ("ring", {"aclshmem_ptr_float", "aclshmem_fence", "aclshmemx_signal_op", "aclshmem_wait_int32"}),
    ("ag_gemm", {"aclshmem_bfloat16_putmem_signal", "aclshmem_wait_int32"}),
])
def test_kernels_compile_for_sm90_calling_the_aclshmem_symbols(compiled, name, symbols):
    k = compiled[name]
    assert symbols <= _symbols(k["ttir"]), (name, _symbols(k["ttir"]))
    assert "triton_dist.dist" not in k["ttir"]           # no Ascend carriers in a CUDA kernel
    assert k["cubin"] > 0
    ptx = k["ptx"]
    assert ".global .align 8 .b8 triton_dist_state[" in ptx   # the state the load hook fills
    assert ".extern .func" not in ptx                          # every call resolved by the library


def test_signals_and_waits_use_system_scope_release_acquire(compiled):
    ptx = compiled["notify_wait"]["ptx"]
    assert "st.release.sys.global.b32" in ptx       # notify SET
    assert "ld.acquire.sys.global.b32" in ptx       # wait polls
    assert "bar.sync" in ptx                         # the program's stores come before the signal
    assert "atom.add.release.sys.global.s32" in compiled["signal_add"]["ptx"]   # notify ADD


def test_consume_token_keeps_the_gemm_pipelined(compiled):
    # the A tiles are loaded through dl.consume_token; the K loop still uses asynchronous copies
    assert "cp.async" in compiled["ag_gemm"]["ptx"]
    assert "wgmma" in compiled["ag_gemm"]["ptx"]


def test_without_a_gpu_backend_cuda_imports_and_refuses_clearly():
    """Importing triton_dist for backend 'cuda' touches no GPU; launching says what is missing."""
    if os.environ.get("PATH") and __import__("shutil").which("nvidia-smi"):
        pytest.skip("this machine has a GPU")
    code = textwrap.dedent("""
        import triton_dist, torch
        assert triton_dist.backend.resolve() == "cuda"
        try:
            triton_dist.launch(lambda: 0, world_size=2)
        except triton_dist.TritonDistError as e:
            print("ERR", e)
        print("cuda initialized:", torch.cuda.is_initialized())
    """)
    env = dict(os.environ, TRITON_DIST_BACKEND="cuda")
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ERR launch(backend='cuda') needs an NVIDIA GPU (nvidia-smi is not on PATH)" in proc.stdout
    assert "cuda initialized: False" in proc.stdout
