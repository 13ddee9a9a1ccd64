"""The real NPU compilers on a CPU: triton-ascend 3.2.0's triton-adapter-opt and AscendNPU-IR 1.2.0's
bishengir-compile, with triton-ascend's own pass list and A2/A3 flags (backend_ascend/pipeline.py).

Oracle: the compilers' own verdicts (exit status and error lines: `ub overflow, requires N bits
while M bits available!`, the crash of a pass), and the C signatures of AscendNPU-IR's aclshmem
wrappers (backend_ascend/aclshmem_wrappers.txt, from Shmem.cpp) for the external calls the
compiled module makes.  Where the tools cannot be had (no x86_64 Linux, offline) these tests
skip, saying which tool is missing and why.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import npu_compile_kernels as K
from triton_dist import symbols as S
from triton_dist.backend_ascend import carry, pipeline, toolchain, wrappers
from triton_dist.cli import main

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KERNELS = os.path.join(HERE, "npu_compile_kernels.py")
TOOLS = toolchain.find()
needs_tools = pytest.mark.skipif(bool(TOOLS.missing), reason="; ".join(TOOLS.missing))

ADD_SIG = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32"
PUT_SIG = {"src": "*fp32", "buf": "*fp32", "sig": "*i32", "peer": "i32"}
UB_LINE = "error: ub overflow, requires {} bits while 1572864 bits available!"


def _cli(capsys, *args):
    rc = main(["npu-compile", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


# --- the tools ---------------------------------------------------------------------------------------------
@needs_tools
def test_the_adapter_is_the_pinned_one_from_the_wheel():
    if TOOLS.adapter_from.startswith("the triton-ascend 3.2.0 wheel"):
        assert toolchain.sha256(TOOLS.adapter) == toolchain.ADAPTER_SHA256
    out = subprocess.run([TOOLS.adapter, "--version"], capture_output=True, text=True, timeout=60).stdout
    assert "LLVM version 20.0.0git" in out, out            # what the 3.2.0 wheel's binary reports


def test_a_cached_adapter_with_another_digest_is_not_used(tmp_path, monkeypatch):
    fake = tmp_path / "triton-adapter-opt"
    fake.write_text("#!/bin/sh\necho not the adapter\n")
    fake.chmod(0o755)
    monkeypatch.setattr(toolchain, "cache_dir", lambda: str(tmp_path))
    monkeypatch.setattr(toolchain, "_installed_triton_ascend_adapter", lambda: None)
    monkeypatch.delenv(toolchain.ADAPTER_ENV, raising=False)
    tools = toolchain.find()
    assert tools.adapter is None
    assert f"does not have the pinned sha256 {toolchain.ADAPTER_SHA256}" in tools.adapter_why


@needs_tools
def test_fetching_again_is_cheap_when_the_adapter_is_there(monkeypatch):
    if not TOOLS.adapter_from.startswith("the triton-ascend 3.2.0 wheel"):
        pytest.skip(f"the adapter here comes from {TOOLS.adapter_from}, not this environment's cache")

    def no_download(*a, **k):
        raise AssertionError(f"pip was run again: {a}")
    monkeypatch.setattr(subprocess, "run", no_download)
    path, message = toolchain.fetch_adapter()
    assert path == TOOLS.adapter and "cached and verified" in message


def test_setup_offline_goes_on_and_the_checks_say_why(tmp_path, monkeypatch, capsys):
    """No PyPI (offline): setup still succeeds, and what the checks skip with names the missing adapter."""
    monkeypatch.setattr(toolchain, "cache_dir", lambda: str(tmp_path))
    monkeypatch.setattr(toolchain, "_installed_triton_ascend_adapter", lambda: None)
    monkeypatch.delenv(toolchain.ADAPTER_ENV, raising=False)
    offline = subprocess.CompletedProcess([], 1, "", "ERROR: Could not find a version that satisfies the requirement "
                                                     "triton-ascend==3.2.0 (from versions: none)")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: offline)
    assert toolchain.main(["fetch"]) == 0
    assert "could not download triton-ascend==3.2.0 (ERROR: Could not find a version" in capsys.readouterr().out
    tools = toolchain.find()
    assert tools.adapter is None and "bash scripts/setup.sh` fetches it" in tools.adapter_why


def test_missing_tools_exit_3_naming_them(capsys, monkeypatch):
    monkeypatch.setenv(toolchain.COMPILER_ENV, "/nonexistent/bishengir-compile")
    rc, out, err = _cli(capsys, f"{KERNELS}::vector_add", "-s", ADD_SIG, "-c", "BLOCK=1024")
    assert rc == 3      # the compilers are not here: not a usage error (2)
    assert "bishengir-compile" in err and "/nonexistent/bishengir-compile is not an executable file" in err


# --- plain kernels -------------------------------------------------------------------------------------------
@needs_tools
def test_a_masked_vector_add_compiles_at_block_1024(capsys):
    rc, out, _ = _cli(capsys, f"{KERNELS}::vector_add", "-s", ADD_SIG, "-c", "BLOCK=1024")
    assert rc == 0, out
    assert "stage reached: bishengir-compile: the whole BiShengHIR pipeline" in out
    assert "aclshmem calls" not in out


@needs_tools
def test_a_masked_vector_add_is_refused_at_block_65536_with_the_compilers_ub_overflow(capsys):
    rc, out, _ = _cli(capsys, f"{KERNELS}::vector_add", "-s", ADD_SIG, "-c", "BLOCK=65536")
    assert rc == 1, out
    assert UB_LINE.format(4194304) in out                  # the compiler's own line, verbatim
    assert "kernel vector_add (--signature x_ptr=*fp32" in out and "BLOCK=65536" in out
    # the hint: which blocks are large, and the fixes
    assert "65536 x f32: 256 KiB per block" in out
    assert "a smaller block: BLOCK=65536 (about BLOCK=16384 fits" in out
    assert "sub-blocks" in out and "multibuffer=False" in out


@needs_tools
def test_the_size_the_hint_suggests_does_fit():
    out = pipeline.compile_kernel(K.vector_add, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                                  {"BLOCK": 16384})
    assert out.accepted, out.report()


@needs_tools
def test_a_small_fp16_dot_compiles_on_the_cube_path(tmp_path, capsys):
    rc, out, _ = _cli(capsys, f"{KERNELS}::dot_fp16", "-s", "a=*fp16,b=*fp16,c=*fp16", "-c", "M=16,N=16,K=16",
                      "--keep", str(tmp_path))
    assert rc == 0, out
    final = (tmp_path / "kernel.convert-hivm-to-std.mlir").read_text()
    # the cube path ran: a cube kernel, operands laid out nd2nz into L1, the matmul an mmad, out through fixpipe
    assert "hivm.module_core_type = #hivm.module_core_type<AIC>" in final
    for call in ("@nd2nz_half(", "@mma_tile_half_to_float(", "@fixpipe_nz2nd_float_to_half_4d_to_2d("):
        assert call in final, call


@needs_tools
def test_keep_writes_every_stage(tmp_path, capsys):
    rc, out, _ = _cli(capsys, f"{KERNELS}::vector_add", "-s", ADD_SIG, "-c", "BLOCK=1024", "--keep", str(tmp_path))
    assert rc == 0, out
    for name in ("kernel.ttir.mlir", "kernel.ttadapter.mlir", "kernel.convert-hivm-to-std.mlir",
                 "bishengir-compile.log", "bishengir-compile.cmd"):
        assert (tmp_path / name).stat().st_size > 0, name
    cmd = (tmp_path / "bishengir-compile.cmd").read_text()
    for flag in ("--target=Ascend910B4", "--enable-auto-multi-buffer=True", "--enable-auto-bind-sub-block=True",
                 "--enable-hfusion-compile=true", "--enable-hivm-compile=true", "--enable-triton-kernel-compile=true"):
        assert flag in cmd


# --- distributed kernels ------------------------------------------------------------------------------------
@needs_tools
def test_a_distributed_kernel_compiles_and_lists_its_aclshmem_calls(capsys, tmp_path):
    sig = ",".join(f"{k}={v}" for k, v in PUT_SIG.items())
    rc, out, _ = _cli(capsys, f"{KERNELS}::put_to_peer", "-s", sig, "-c", "BLOCK=64", "--keep", str(tmp_path))
    assert rc == 0, out
    calls = out.split("aclshmem calls:\n", 1)[1].split("stages kept")[0].split()
    assert calls == ["aclshmem_consume_token_float_ptr_1d", "aclshmem_fence", "aclshmem_ptr_float",
                     "aclshmem_wait_int32", "aclshmemx_signal_op"]
    # each is an external call of the module hivmc would get, named as the wrapper library names it
    final = (tmp_path / "kernel.convert-hivm-to-std.mlir").read_text()
    for name in calls:
        assert f"@{name}(" in final or f"@_mlir_ciface_{name}(" in final, name
        assert name in wrappers.wrappers()
    # no carrier is left: the kernel has its own 4 arguments plus the adapter's 2 + 6
    from triton_dist.backend_ascend import hivm
    head = next(line for line in (tmp_path / "kernel.ttadapter.mlir").read_text().splitlines() if "func.func" in line)
    args = hivm._split_top(head[head.index("(") + 1:head.index(") attributes")])
    assert len(args) == 4 + 8 and not any(a.startswith("%dist_") for a in args), args


@needs_tools
def test_a_distributed_kernel_with_a_256_kib_tile_is_refused_with_ub_overflow():
    out = pipeline.compile_kernel(K.put_to_peer, PUT_SIG, {"BLOCK": 65536})
    assert not out.accepted
    assert any(UB_LINE.format(2097152) in e for e in out.errors), out.errors
    assert "65536 x f32: 256 KiB per block" in out.hint


@needs_tools
@pytest.mark.parametrize("dot", [False, True], ids=["vector", "mix"])
@pytest.mark.parametrize("kernel", list(K.OPS), ids=[k.fn.__name__ for k in K.OPS])
def test_every_distributed_op_compiles_to_its_wrapper(kernel, dot):
    """Every op of triton_dist/symbols.py, in a vector-only and in a mix kernel (a dot): accepted, and
    its symbol is among the external calls, each a wrapper of Shmem.cpp with the wrapper's argument form."""
    sig, ops = K.OPS[kernel]
    out = pipeline.compile_kernel(kernel, {**sig, **K.DOT_SIG}, {"DOT": dot})
    assert out.accepted, out.report()
    assert not out.call_problems
    spec = {**S.DL_OPS, **S.SHMEM_OPS}
    for op in ops:
        family = spec[op].family
        assert any(S.family_of(sym) == family for sym in out.symbols), (op, out.symbols)


def test_the_ops_are_all_covered():
    covered = {op for _, ops in K.OPS.values() for op in ops}
    assert covered == set(S.DL_OPS) | set(S.SHMEM_OPS)


def test_the_call_check_refuses_what_does_not_link():
    """Both sides: the wrapper's form passes, another form or an unknown name is caught."""
    good = ("func.func private @aclshmemx_signal_op(memref<?xi32, strided<[?], offset: ?>, #hivm.address_space<gm>>, "
            "i32, i32, i32) attributes {llvm.emit_c_interface}")
    wrong = good.replace("i32, i32, i32)", "i64, i32, i32)")
    unknown = "func.func private @_mlir_ciface_aclshmem_ptr() -> i32 attributes {llvm.emit_c_interface}"
    ptr = ("func.func private @aclshmem_ptr_float.vector(memref<?xf32, strided<[?], offset: ?>, #hivm.address_space<gm>>, "
           "i32) -> memref<?xf32, #hivm.address_space<gm>> attributes {llvm.emit_c_interface}")
    (ok,) = wrappers.extern_calls(good)
    assert ok.problem == "" and "by value" in ok.note
    (bad,) = wrappers.extern_calls(wrong)
    assert "is called as void(memref<1d i32>, i64, i32, i32) but the wrapper is void(memref<int32_t,1>, int32_t, int, int)" \
        in bad.problem
    (nope,) = wrappers.extern_calls(unknown)
    assert "is not a wrapper" in nope.problem
    (p,) = wrappers.extern_calls(ptr)          # a memref result is the wrapper's leading out-pointer
    assert p.symbol == "aclshmem_ptr_float" and p.problem == ""


def test_sub_vec_id_lowers_to_the_hivm_op_triton_ascend_emits():
    """triton-ascend's main line builds hivm::GetSubBlockIdxOp and marks the module
    hivm.disable_auto_tile_and_bind_subblock (third_party/ascend/ascend_ir.cc:703-712 at a84b1eb5)."""
    from triton_dist.backend_ascend import lower
    text = lower(K.on_sub_core_0, {"ptr": "*i32"})
    assert text.startswith("module attributes {hivm.disable_auto_tile_and_bind_subblock} {")
    assert "= hivm.hir.get_sub_block_idx -> i64" in text and "triton_dist.sub_vec_id" not in text


@needs_tools
def test_a_kernel_using_sub_vec_id_compiles():
    out = pipeline.compile_kernel(K.on_sub_core_0, {"ptr": "*i32"})
    assert out.accepted, out.report()
    assert out.symbols == ["aclshmem_my_pe"]


# --- what the 3.2.0 tools cannot do (docs/ascend.md, "What the real compilers refuse") ---------------------------
@needs_tools
def test_barrier_all_with_a_dist_result_stored_in_a_vector_kernel_crashes_bishengir():
    """shm.barrier_all() is CUBE_AND_VECTOR (docs/semantics.md §6); in a vector-only kernel that stores
    the result of another distributed op, bishengir-compile 1.2.0 dies in hivm-mark-real-core-type."""
    src = textwrap.dedent('''
        import triton
        import triton.language as tl
        import triton_dist.language as dl
        from triton_dist.language.extra import libshmem_device as shm

        @triton.jit
        def k(out, DOT: tl.constexpr):
            shm.barrier_all()
            tl.store(out + 1, dl.rank())
    ''')
    mod = _module_from(src, "barrier_all_crash")
    out = pipeline.compile_kernel(mod.k, {"out": "*i32"}, {"DOT": False})
    assert not out.accepted and out.failed_at == "bishengir-compile"
    assert out.errors[0].startswith("bishengir-compile crashed (SIGSEGV"), out.errors
    ok = pipeline.compile_kernel(K.ops_barrier_all, {"out": "*i32", **K.DOT_SIG}, {"DOT": False})
    assert ok.accepted, ok.report()         # alone (a constant stored after it) it compiles


@needs_tools
def test_a_pointer_chosen_in_a_branch_crashes_the_adapter():
    """triton-adapter-opt 3.2.0 dies on a pointer yielded by scf.if, with no distributed op at all: the
    pattern `rbuf = ws; if s > 0: rbuf = dl.consume_token(ws, tok)` of the ring kernel met it (known_limits.py
    listed the library's ring and ag_gemm kernels until they chose no pointer in a branch).  The twin that
    chooses an offset in the branch and forms the pointer after it, as the ring kernel now chooses its
    token, is accepted."""
    src = textwrap.dedent('''
        import triton
        import triton.language as tl

        @triton.jit
        def k(a, out, s, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            p = a
            if s > 0:
                p = a + 64
            tl.store(out + offs, tl.load(p + offs))
    ''')
    mod = _module_from(src, "branch_pointer")
    out = pipeline.compile_kernel(mod.k, {"a": "*fp32", "out": "*fp32", "s": "i32"}, {"BLOCK": 64})
    assert not out.accepted and out.failed_at.startswith("ttadapter")
    assert out.errors[0].startswith("triton-adapter-opt crashed (SIGSEGV"), out.errors
    twin = _module_from(src.replace("p = a\n", "d = 0\n").replace("p = a + 64", "d = 64")
                        .replace("tl.load(p + offs)", "tl.load(a + d + offs)"), "branch_offset")
    ok = pipeline.compile_kernel(twin.k, {"a": "*fp32", "out": "*fp32", "s": "i32"}, {"BLOCK": 64})
    assert ok.accepted, ok.report()


def test_consume_token_of_a_tile_of_pointers_is_not_carried():
    from triton_dist.backend_ascend.frontend import build_ttir
    module, _ = build_ttir(K.consume_a_tile_of_pointers, {"sig": "*i32", "buf": "*fp32"})
    with pytest.raises(carry.CarryError, match=r"operand 0 is tensor<4x!tt.ptr<f32>>; only scalars and scalar "
                                               r"pointers can be carried"):
        carry.carry_ttir(module.str_nodebug(), False)


def _module_from(src, name):
    import importlib.util
    import tempfile
    d = tempfile.mkdtemp()
    path = os.path.join(d, f"{name}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --- on every launch: launch(npu_compile=True), pytest --npu-compile ----------------------------------------------
def test_the_launch_signature_is_tritons():
    import torch
    from triton_dist.backend_ascend.compile_check import signature_of
    from triton_dist.kernel_launches import Launch
    launch = Launch(K.vector_add, {"x_ptr": torch.zeros(4, dtype=torch.float16), "y_ptr": torch.zeros(4),
                                   "out_ptr": torch.zeros(4, dtype=torch.int64), "n": 2 ** 40, "BLOCK": 16},
                    ("BLOCK",))
    sig, consts = signature_of(launch)
    assert sig == {"x_ptr": "*fp16", "y_ptr": "*fp32", "out_ptr": "*i64", "n": "i64"}
    assert consts == {"BLOCK": 16}


# what a session run with --npu-compile (scripts/test.sh) puts in the environment
NPU_COMPILE_ENV = ("TRITON_DIST_LAUNCH_CHECKS", "TRITON_DIST_NPU_COMPILE_SOURCES", "TRITON_DIST_NPU_COMPILE_LOG")


def _outside_any_npu_compile_session(monkeypatch):
    for k in NPU_COMPILE_ENV:
        monkeypatch.delenv(k, raising=False)


def _add_main(block):
    import torch
    x, y, o = torch.arange(4096, dtype=torch.float32), torch.ones(4096), torch.zeros(4096)
    K.vector_add[(max(1, 4096 // block),)](x, y, o, 4096, BLOCK=block)
    return float(o[:4096].sum())


@needs_tools
def test_launch_with_npu_compile_fails_on_what_the_compiler_refuses(tmp_path, monkeypatch):
    import triton_dist
    from triton_dist.errors import RankError
    _outside_any_npu_compile_session(monkeypatch)
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", str(tmp_path))
    ok = triton_dist.launch(_add_main, 1024, world_size=2, npu_compile=True)
    assert ok.values == [float(sum(range(4096)) + 4096)] * 2
    with pytest.raises(RankError) as e:
        triton_dist.launch(_add_main, 65536, world_size=2, npu_compile=True)
    assert e.value.exc_type == "NpuCompileError"
    assert UB_LINE.format(4194304) in e.value.message
    # without it, the same launch runs (the simulator has no UB to overflow)
    assert triton_dist.launch(_add_main, 65536, world_size=2).values[0] == float(sum(range(4096)) + 4096)


PYTEST_FILE = '''
import pytest, torch, triton_dist
import npu_compile_kernels as K

def _main(block):
    x, y, o = torch.arange(4096, dtype=torch.float32), torch.ones(4096), torch.zeros(4096)
    K.vector_add[(max(1, 4096 // block),)](x, y, o, 4096, BLOCK=block)
    K.vector_add[(max(1, 4096 // block),)](x, y, o, 4096, BLOCK=block)     # the same kernel again
    return 0

@pytest.mark.parametrize("block", [512, 1024, 65536])
def test_add(block):
    triton_dist.launch(_main, block, world_size=2)

def test_add_again():
    triton_dist.launch(_main, 512, world_size=2)
'''


@needs_tools
def test_pytest_npu_compile_fails_the_launching_test_and_sums_up_the_session(tmp_path):
    (tmp_path / "test_user.py").write_text(PYTEST_FILE)
    log = tmp_path / "launches.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in NPU_COMPILE_ENV}
    env.update(TRITON_DIST_NPU_COMPILE_CACHE=str(tmp_path / "cache"), TRITON_DIST_NPU_COMPILE_LOG=str(log),
               PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))

    def session():
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                               "--npu-compile", str(tmp_path / "test_user.py")], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=900)

    first = session()
    assert "1 failed, 3 passed" in first.stdout, first.stdout + first.stderr
    assert "FAILED test_user.py::test_add[65536]" in first.stdout
    assert UB_LINE.format(4194304) in first.stdout
    assert ("npu-compile: 3 distinct kernels: 2 accepted (2 compiled now, 0 from the cache), 1 refused, 0 known limits, 0 skipped"
            in first.stdout), first.stdout
    fresh = [json.loads(line) for line in log.read_text().splitlines()]
    # each distinct kernel was compiled once in the session, by one process (the other rank read its verdict)
    assert sorted(r["constexprs"]["BLOCK"] for r in fresh if not r["cached"]) == ["1024", "512", "65536"]
    log.write_text("")
    second = session()                      # a new session: the verdicts come from the disk cache
    assert "npu-compile: 3 distinct kernels: 2 accepted (0 compiled now, 2 from the cache), 1 refused" in second.stdout
    assert UB_LINE.format(4194304) in second.stdout


def _is_jit(node):
    import ast
    return isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list)


def _kernel_of(key):
    """The kernel `path::name` as its file defines it.  An upstream scenario or an example imports host
    modules too (shmem, torch_npu: the compat layer of `triton-dist run --shmem-compat`), so only what
    the kernels need is run out of the file, at its own lines (Triton reads the source back from
    them): its triton / triton_dist imports, its constants and its @triton.jit functions."""
    import ast
    import importlib
    file, name = key.split("::")
    path = os.path.join(ROOT, file)
    if file.startswith("triton_dist/"):
        return getattr(importlib.import_module(os.path.splitext(file)[0].replace("/", ".")), name)

    def kernel_import(node):
        mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        return all(m.split(".")[0] in ("triton", "triton_dist") for m in mods)

    def constant(node):
        try:
            return isinstance(node, ast.Assign) and ast.literal_eval(node.value) is not None
        except ValueError:
            return False
    tree = ast.parse(open(path).read(), path)
    body = [n for n in tree.body if (isinstance(n, (ast.Import, ast.ImportFrom)) and kernel_import(n))
            or constant(n) or _is_jit(n)]
    scope = {"__name__": f"_npu_compile_{os.path.splitext(os.path.basename(file))[0]}", "__file__": path}
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), scope)
    return scope[name]


@needs_tools
@pytest.mark.parametrize("limit", __import__("triton_dist.backend_ascend.known_limits",
                                             fromlist=["LIMITS"]).LIMITS, ids=lambda lim: lim.kernel.split("::")[1])
def test_every_known_limit_still_reproduces(limit, tmp_path, monkeypatch):
    """A recorded limit is the compiler's refusal of that kernel today; the launch check reports it as
    a known limit (not a failure), and only for that error."""
    from triton_dist.backend_ascend import compile_check, known_limits
    _outside_any_npu_compile_session(monkeypatch)
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", str(tmp_path))
    kernel = _kernel_of(limit.kernel)
    sig, consts = limit.launch
    status, out = compile_check.check(getattr(kernel, "fn", kernel), sig, consts)
    assert status == "known-limit", (status, getattr(out, "errors", out))
    assert any(limit.error in e for e in out.errors)
    assert known_limits.match(limit.kernel, ["some other error"]) is None


def test_only_the_kernels_under_the_sources_are_compiled(monkeypatch):
    from triton_dist.backend_ascend import compile_check
    fn = getattr(K.vector_add, "fn", K.vector_add)
    monkeypatch.setenv(compile_check.SOURCES_ENV, os.path.join(ROOT, "triton_dist", "kernels"))
    assert not compile_check._wanted(fn)
    monkeypatch.setenv(compile_check.SOURCES_ENV, f"{os.path.join(ROOT, 'examples')},{KERNELS}")
    assert compile_check._wanted(fn)
    monkeypatch.setenv(compile_check.SOURCES_ENV, HERE)
    assert compile_check._wanted(fn)
    monkeypatch.setenv(compile_check.SOURCES_ENV, HERE + "_not")      # a prefix of the name is not the directory
    assert not compile_check._wanted(fn)


def test_a_kernel_left_out_under_one_setting_of_the_sources_is_compiled_under_another(monkeypatch):
    """One process (an xdist worker) runs launches of an outer --npu-compile-sources session and a
    test's own launch(..., npu_compile=True) outside it: what was left out before is compiled now."""
    import torch
    from triton_dist.backend_ascend import compile_check
    from triton_dist.kernel_launches import Launch
    checked = []
    monkeypatch.setattr(compile_check, "check", lambda fn, sig, consts, tgt=None: checked.append(consts) or ("accepted", None))
    monkeypatch.setattr(compile_check, "_verdicts", {})
    launch = Launch(K.vector_add, {"x_ptr": torch.zeros(4), "y_ptr": torch.zeros(4), "out_ptr": torch.zeros(4),
                                   "n": 4, "BLOCK": 16}, ("BLOCK",))
    monkeypatch.setenv(compile_check.SOURCES_ENV, os.path.join(ROOT, "triton_dist", "kernels"))
    compile_check.check_launch(launch)
    assert checked == []
    monkeypatch.delenv(compile_check.SOURCES_ENV)
    compile_check.check_launch(launch)
    assert checked == [{"BLOCK": 16}]


# --- every kernel of the library, the examples and the upstream scenarios ---------------------------------------
# scripts/test.sh's --npu-compile-sources: the whole suite compiles these kernels as it launches them; this
# test makes sure none is left out (a kernel no test launches) and compiles each outside any such session.
COMPILED_SOURCES = ("triton_dist/kernels", "examples", "tests/upstream_scenarios")

# The upstream scenarios run under `triton-dist run` (not recorded in tests/data/kernel_signatures.json):
# one launch of each kernel as tests/test_upstream.py makes it (read from a --npu-compile session's log).
UPSTREAM_LAUNCHES = {
    "ag_gemm.py::ag_gemm_kernel": (
        {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "peer_mem": "*fp16", "rank": "i32", "rank_size": "i32"},
        {"M": 64, "N": 32, "K": 32, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "PVALUE": 2, "BUFFERS": 2,
         "COMM_M": 8, "COMM_K": 16}),
    "barrier_ops.py::ring_world": ({"counter": "*i64", "rank": "i32", "world": "i32"}, {"VEC": True}),
    "barrier_ops.py::ring_team": ({"counter": "*i64", "team": "i32"}, {"VEC": False}),
    "gemm_reduce.py::gemm_reduce_kernel": (
        {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "peer_mem": "*fp32", "rank": "i32", "rank_size": "i32"},
        {"M_PART": 32, "N": 32, "K": 32, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "PVALUE": 1, "BUFFERS": 2,
         "COMM_M": 8, "COMM_N": 16, "SCATTER": True}),
    "my_pe.py::add_my_pe": ({"ptr": "*i64"}, {}),
    "my_pe.py::add_num_ranks": ({"ptr": "*i64"}, {}),
    "put_get.py::put": ({"dst": "*i32", "src": "*i32", "peer": "i32"}, {"NBYTES": 128, "NBI": True}),
    "put_get.py::get": ({"dst": "*i32", "src": "*i32", "peer": "i32"}, {"NBYTES": 128, "NBI": False}),
    "put_get.py::put_signal": ({"dst": "*i32", "src": "*i32", "sig": "*i32", "epoch": "i32", "my_rank": "i32",
                                "peer": "i32"}, {"NBYTES": 128, "NBI": False}),
    "put_get.py::signal_wait": ({"sig": "*i32", "recv_peer": "i32", "epoch": "i32"}, {}),
    "put_get.py::sync_barrier": ({"sync": "*i32", "my_rank": "i32", "world": "i32", "epoch": "i32"}, {}),
    "signal_op.py::wait_until_retval": ({"sig": "*i32", "ret": "*i32", "rank": "i32"}, {}),
    "signal_op.py::set_ring": ({"sig": "*i32", "rank": "i32", "world": "i32"}, {}),
    "signal_op.py::ping_pong": ({"sig": "*i32", "rank": "i32"}, {"ROUNDS": 100}),
    "symm_at.py::read_neighbour": ({"remote_ptr": "*i64", "output_ptr": "*i64", "rank": "i32", "world_size": "i32"},
                                   {}),
    "wait_notify.py::producer": ({"data_ptr": "*i64", "signal_ptr": "*i64", "rank": "i32", "world_size": "i32"},
                                 {"FENCE": True}),
    "wait_notify.py::consumer": ({"data_ptr": "*i64", "signal_ptr": "*i64", "output_ptr": "*i64", "rank": "i32",
                                  "world_size": "i32"}, {}),
}


def _launched_kernels(path):
    """Module-level @triton.jit functions of a file that no other @triton.jit function of it calls
    (those are helpers, compiled inlined into the kernels that call them)."""
    import ast
    tree = ast.parse(open(os.path.join(ROOT, path)).read())
    jitted = {n.name: n for n in tree.body if _is_jit(n)}
    called = {sub.func.id for n in jitted.values() for sub in ast.walk(n)
              if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in jitted}
    return [name for name in jitted if name not in called]


def _source_kernels():
    out = []
    for src in COMPILED_SOURCES:
        for f in sorted(os.listdir(os.path.join(ROOT, src))):
            if f.endswith(".py"):
                out += [f"{src}/{f}::{name}" for name in _launched_kernels(f"{src}/{f}")]
    return out


def _a_launch_of(key):
    """(signature, constexprs) of one launch of the kernel the suite makes, or None."""
    import triton.language as tl
    file, name = key.split("::")
    if file.startswith("tests/upstream_scenarios/"):
        return UPSTREAM_LAUNCHES.get(f"{os.path.basename(file)}::{name}")
    entries = json.load(open(os.path.join(HERE, "data", "kernel_signatures.json")))["recorded"].get(key)
    if not entries:
        return None
    e = entries[0]
    return e["signature"], {k: getattr(tl, v["dtype"]) if isinstance(v, dict) else v for k, v in e["constexprs"].items()}


def test_the_sources_compiled_in_ci_are_scripts_test_shs():
    script = open(os.path.join(ROOT, "scripts", "test.sh")).read()
    assert f"--npu-compile-sources {','.join(COMPILED_SOURCES)}" in script


@needs_tools
@pytest.mark.parametrize("key", _source_kernels())
def test_every_kernel_of_the_sources_compiles_or_is_a_known_limit(key, monkeypatch):
    """Accepted by the real pipeline, or refused with the error its recorded limit names (known_limits.py,
    docs/ascend.md "What the real compilers refuse").  The verdict lands in the same on-disk cache as the
    suite's own launch checks, so under scripts/test.sh each kernel still compiles once."""
    from triton_dist.backend_ascend import compile_check, known_limits
    _outside_any_npu_compile_session(monkeypatch)
    launch = _a_launch_of(key)
    assert launch is not None, (f"{key}: no launch of it is known; add its signature "
                                f"({'UPSTREAM_LAUNCHES here' if 'upstream' in key else 'scripts/record_kernel_signatures.py'})")
    kernel = _kernel_of(key)
    status, out = compile_check.check(getattr(kernel, "fn", kernel), *launch)
    assert status in ("accepted", "known-limit"), (status, out.report() if hasattr(out, "report") else out)
    if status == "known-limit":
        limit = known_limits.match(key, out.errors)
        assert limit is not None and any(limit.error in e for e in out.errors)


def test_every_known_limit_is_a_kernel_of_the_sources():
    from triton_dist.backend_ascend import known_limits
    assert {lim.kernel for lim in known_limits.LIMITS} <= set(_source_kernels())


def _slow_check_main(kernel_seconds):
    import time

    import torch
    x, o = torch.arange(64, dtype=torch.float32), torch.zeros(64)
    K.vector_add[(1,)](x, x, o, 64, BLOCK=64)
    time.sleep(kernel_seconds)                   # the rank's own work, which the timeout counts
    return float(o.sum())


@pytest.mark.parametrize("kernel_seconds,times_out", [(0, False), (8, True)], ids=["check-slow", "rank-slow"])
def test_the_launch_timeout_leaves_out_the_time_of_the_launch_checks(kernel_seconds, times_out, monkeypatch):
    """A cold NPU compile runs inside the launch that first meets the kernel (at load 60, 4-10 s a
    kernel); it is not the ranks running, so a launch whose check takes longer than its timeout still
    ends, while the ranks' own time past the timeout still times it out."""
    import time

    import triton_dist
    from triton_dist import registry
    from triton_dist.errors import LaunchTimeoutError
    _outside_any_npu_compile_session(monkeypatch)
    monkeypatch.setattr(registry, "launch_check", lambda name: lambda launch: time.sleep(8 - kernel_seconds))
    monkeypatch.setenv("TRITON_DIST_LAUNCH_CHECKS", "npu-compile")
    if times_out:
        with pytest.raises(LaunchTimeoutError, match="timed out after 5 s"):
            triton_dist.launch(_slow_check_main, kernel_seconds, world_size=2, timeout=5)
    else:
        assert triton_dist.launch(_slow_check_main, kernel_seconds, world_size=2, timeout=5).values == \
            [float(2 * sum(range(64)))] * 2
