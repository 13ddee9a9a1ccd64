"""npu-compile says only what the compilers say (issue 32): no stale verdict from the cache, newer
Triton's TTIR given to the 3.2.0 adapter in the form it parses (or "cannot lower", never "refused"),
and every argument, target, path and cache problem an exit 2 with one line, never a refusal.

Oracle: the real compilers' verdicts (triton-ascend 3.2.0's triton-adapter-opt, bishengir-compile
1.2.0: accepted, or `ub overflow, requires N bits`), and bishengir-compile's own --target list.
The TTIR of stock triton 3.9.0 below was printed by that release's frontend for these kernels
(tests/test_npu_compile_trust.py::cached_load and friends, traced by backend_ascend/frontend.py),
so these cases run in any environment that has the tools; where .venv-triton-3.9.0 exists
(scripts/triton_venv.sh 3.9.0) the same kernels are also compiled end to end there.
"""
import os
import subprocess
import sys
import types

import pytest
import triton
import triton.language as tl

from triton_dist.backend_ascend import cache as vcache
from triton_dist.backend_ascend import compile_check, pipeline, toolchain, ttir_forms
from triton_dist.backend_ascend.extension_ops import CannotLower
from triton_dist.cli import main

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = toolchain.find()
needs_tools = pytest.mark.skipif(bool(TOOLS.missing), reason="; ".join(TOOLS.missing))
UB = "ub overflow"


# --- kernels ----------------------------------------------------------------------------------------------------
@triton.jit
def act(x_ptr, out_ptr, n):
    offs = tl.arange(0, 1024)                     # 4 KiB tiles
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


ACT_SMALL = act


@triton.jit
def act(x_ptr, out_ptr, n):  # noqa: F811 - the same name, edited: 131072 x fp32, 512 KiB tiles
    offs = tl.arange(0, 131072)
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


ACT_BIG = act
act = ACT_SMALL


@triton.jit
def apply(x_ptr, out_ptr, n, ACT: tl.constexpr):
    ACT(x_ptr, out_ptr, n)


@triton.jit
def calls_helper(x_ptr, out_ptr, n):
    _helper(x_ptr, out_ptr, n)


_helper = ACT_SMALL


@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


def not_jitted(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def cached_load(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, cache_modifier=".cg", eviction_policy="evict_last") + 1)


@triton.jit
def bf16_to_fp16(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.float16))


@triton.jit
def descriptor_copy(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
    d = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK, BLOCK])
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs[:, None] * BLOCK + offs[None, :], d.load([0, 0]))


@triton.jit
def store_then_barrier(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)
    tl.debug_barrier()
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


APPLY_SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


def _cli(capsys, *args):
    try:
        rc = main(["npu-compile", *args])
    except SystemExit as e:            # argparse's exit(2, message) for a user error
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


# --- the cache key holds everything that changes the compile ------------------------------------------------
@needs_tools
def test_an_edited_constexpr_function_is_compiled_again_not_served_from_the_cache(tmp_path):
    verdicts = vcache.Cache(str(tmp_path))
    first = pipeline.compile_kernel(apply, APPLY_SIG, {"ACT": ACT_SMALL}, cache=verdicts)
    assert first.accepted and not first.cached, first.report()
    # `act` edited: a new function object of the same name, whose tile no longer fits the 192 KiB UB
    edited = pipeline.compile_kernel(apply, APPLY_SIG, {"ACT": ACT_BIG}, cache=verdicts)
    assert not edited.cached, "the verdict of the old `act` was served for the edited one"
    assert edited.status == "refused" and any(UB in e for e in edited.errors), edited.report()
    again = pipeline.compile_kernel(apply, APPLY_SIG, {"ACT": ACT_SMALL}, cache=verdicts)
    assert again.accepted and again.cached        # the cache still answers for what did not change


@needs_tools
def test_a_rebound_helper_the_kernel_calls_is_compiled_again(tmp_path, monkeypatch):
    verdicts = vcache.Cache(str(tmp_path))
    first = pipeline.compile_kernel(calls_helper, APPLY_SIG, cache=verdicts)
    assert first.accepted and not first.cached, first.report()
    monkeypatch.setitem(globals(), "_helper", ACT_BIG)
    edited = pipeline.compile_kernel(calls_helper, APPLY_SIG, cache=verdicts)
    assert not edited.cached and edited.status == "refused" and any(UB in e for e in edited.errors), edited.report()


class _Tools:
    def digest(self):
        return "tools"


def test_the_cache_key_holds_the_triton_the_target_and_the_options(monkeypatch):
    def key(**kw):
        args = dict(jit_key="k", name="add_one", signature={"x_ptr": "*fp32"}, constexprs={"BLOCK": 16},
                    target="Ascend910B4", options=None, tools=_Tools())
        args.update(kw)
        return pipeline.cache_key(**args)
    base = key()
    assert key() == base
    assert key(target="Ascend910B2") != base
    assert key(options={"multibuffer": False}) != base
    other = "stock triton 3.5.1" if pipeline.triton_identity() != "stock triton 3.5.1" else "stock triton 3.9.0"
    monkeypatch.setattr(pipeline, "triton_identity", lambda: other)
    assert key() != base, "a verdict made from one Triton's TTIR would be served for another's"


OUT_DTYPE = tl.float16


@triton.jit
def cast_to_global_dtype(x_ptr, y_ptr):
    tl.store(y_ptr, tl.load(x_ptr).to(OUT_DTYPE))


_consts = types.ModuleType("npu_compile_trust_consts")
_consts.SCALE = tl.constexpr(2.0)


@triton.jit
def scaled_by_module_constant(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) * _consts.SCALE)


def test_the_source_key_follows_constexpr_functions_called_helpers_and_global_dtypes(monkeypatch):
    from triton_dist.backend_ascend.source_key import source_key
    assert source_key(apply, {"ACT": ACT_SMALL}) == source_key(apply, {"ACT": ACT_SMALL})
    assert source_key(apply, {"ACT": ACT_SMALL}) != source_key(apply, {"ACT": ACT_BIG})
    before = source_key(calls_helper)
    monkeypatch.setitem(globals(), "_helper", ACT_BIG)
    assert source_key(calls_helper) != before
    before = source_key(cast_to_global_dtype)
    monkeypatch.setitem(globals(), "OUT_DTYPE", tl.bfloat16)
    assert source_key(cast_to_global_dtype) != before
    # a constant read as a module's attribute (gemm.py's flags): Triton's cache_key misses it
    before = source_key(scaled_by_module_constant)
    monkeypatch.setattr(_consts, "SCALE", tl.constexpr(3.0))
    assert source_key(scaled_by_module_constant) != before


# --- newer Triton's TTIR reaches the 3.2.0 adapter in the form it parses ------------------------------------
# printed by stock triton 3.9.0's frontend (backend_ascend/frontend.build_ttir, str_nodebug) for the kernels above
TTIR_39 = {
    "cached_load": """module {
  tt.func public @cached_load(%arg0: !tt.ptr<f32>, %arg1: i32) attributes {noinline = false} {
    %cst = arith.constant dense<1.000000e+00> : tensor<64xf32>
    %0 = tt.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %1 = tt.splat %arg0 : !tt.ptr<f32> -> tensor<64x!tt.ptr<f32>>
    %2 = tt.addptr %1, %0 : tensor<64x!tt.ptr<f32>>, tensor<64xi32>
    %3 = tt.load %2 {cachePolicy = #tt.cache_policy<cache_modifier = cg, eviction_policy = evict_last>} : tensor<64x!tt.ptr<f32>>
    %4 = arith.addf %3, %cst : tensor<64xf32>
    tt.store %2, %4 : tensor<64x!tt.ptr<f32>>
    tt.return
  }
}
""",
    "bf16_to_fp16": """module {
  tt.func public @bf16_to_fp16(%arg0: !tt.ptr<bf16>, %arg1: !tt.ptr<f16>) attributes {noinline = false} {
    %0 = tt.make_range {end = BLOCK : i32, start = 0 : i32} : tensor<BLOCKxi32>
    %1 = tt.splat %arg0 : !tt.ptr<bf16> -> tensor<BLOCKx!tt.ptr<bf16>>
    %2 = tt.addptr %1, %0 : tensor<BLOCKx!tt.ptr<bf16>>, tensor<BLOCKxi32>
    %3 = tt.load %2 : tensor<BLOCKx!tt.ptr<bf16>>
    %4 = tt.splat %arg1 : !tt.ptr<f16> -> tensor<BLOCKx!tt.ptr<f16>>
    %5 = tt.addptr %4, %0 : tensor<BLOCKx!tt.ptr<f16>>, tensor<BLOCKxi32>
    %6 = tt.fp_to_fp %3, rounding = rtne : tensor<BLOCKxbf16> -> tensor<BLOCKxf16>
    tt.store %5, %6 : tensor<BLOCKx!tt.ptr<f16>>
    tt.return
  }
}
""",
    "descriptor_copy": """module {
  tt.func public @descriptor_copy(%arg0: !tt.ptr<f32>, %arg1: !tt.ptr<f32>, %arg2: i32, %arg3: i32) attributes {noinline = false} {
    %c0_i32 = arith.constant 0 : i32
    %cst = arith.constant dense<16> : tensor<16x1xi32>
    %c1_i64 = arith.constant 1 : i64
    %0 = arith.extsi %arg3 : i32 to i64
    %1 = tt.make_tensor_descriptor %arg0, [%arg2, %arg3], [%0, %c1_i64] : <f32>, <16x16xf32>
    %2 = tt.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
    %3 = tt.expand_dims %2 {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
    %4 = arith.muli %3, %cst : tensor<16x1xi32>
    %5 = tt.splat %arg1 : !tt.ptr<f32> -> tensor<16x1x!tt.ptr<f32>>
    %6 = tt.addptr %5, %4 : tensor<16x1x!tt.ptr<f32>>, tensor<16x1xi32>
    %7 = tt.expand_dims %2 {axis = 0 : i32} : tensor<16xi32> -> tensor<1x16xi32>
    %8 = tt.broadcast %6 : tensor<16x1x!tt.ptr<f32>> -> tensor<16x16x!tt.ptr<f32>>
    %9 = tt.broadcast %7 : tensor<1x16xi32> -> tensor<16x16xi32>
    %10 = tt.addptr %8, %9 : tensor<16x16x!tt.ptr<f32>>, tensor<16x16xi32>
    %11 = tt.descriptor_load %1[%c0_i32, %c0_i32] : !tt.tensordesc<16x16xf32> -> tensor<16x16xf32>
    tt.store %10, %11 : tensor<16x16x!tt.ptr<f32>>
    tt.return
  }
}
""",
    "store_then_barrier": """module {
  tt.func public @store_then_barrier(%arg0: !tt.ptr<f32>) attributes {noinline = false} {
    %cst = arith.constant dense<1.000000e+00> : tensor<64xf32>
    %cst_0 = arith.constant dense<2.000000e+00> : tensor<64xf32>
    %0 = tt.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %1 = tt.splat %arg0 : !tt.ptr<f32> -> tensor<64x!tt.ptr<f32>>
    %2 = tt.addptr %1, %0 : tensor<64x!tt.ptr<f32>>, tensor<64xi32>
    %3 = tt.load %2 : tensor<64x!tt.ptr<f32>>
    %4 = arith.mulf %3, %cst_0 : tensor<64xf32>
    tt.store %2, %4 : tensor<64x!tt.ptr<f32>>
    ttg.barrier all
    %5 = tt.load %2 : tensor<64x!tt.ptr<f32>>
    %6 = arith.addf %5, %cst : tensor<64xf32>
    tt.store %2, %6 : tensor<64x!tt.ptr<f32>>
    tt.return
  }
}
""",
}


def _ttir(name, block=64):
    return TTIR_39[name].replace("BLOCK", str(block))


def test_the_39_forms_are_rewritten_as_triton_ascend_32_prints_them():
    text, forms = ttir_forms.to_320(_ttir("cached_load"))
    assert forms == ["cache_policy"]
    assert "tt.load %2 cacheModifier = cg evictionPolicy = evict_last : tensor<64x!tt.ptr<f32>>" in text
    text, forms = ttir_forms.to_320(_ttir("descriptor_copy"))
    assert forms == ["tensordesc"] and "<f32>, <tensor<16x16xf32>>" in text
    assert "!tt.tensordesc<tensor<16x16xf32>> -> tensor<16x16xf32>" in text
    text, forms = ttir_forms.to_320(_ttir("bf16_to_fp16"))
    assert forms == ["fp_to_fp"] and "tt.fp_to_fp" not in text
    assert "arith.extf %3 : tensor<64xbf16> to tensor<64xf32>" in text
    text, forms = ttir_forms.to_320(_ttir("store_then_barrier"))
    assert forms == ["barrier"] and "    gpu.barrier\n" in text and "ttg." not in text
    # a rounding mode 3.2 also emits as tt.fp_to_fp stays as it is
    rtz = "    %7 = tt.fp_to_fp %6, rounding = rtz : tensor<64xf32> -> tensor<64xf16>"
    assert ttir_forms.to_320(rtz) == (rtz, [])


@needs_tools
@pytest.mark.parametrize("name", sorted(TTIR_39))
def test_newer_ttir_is_accepted_by_the_320_adapter_and_bishengir(name):
    r = pipeline.run_pipeline(_ttir(name), False, name, TOOLS)
    assert r["status"] == "accepted", r["errors"]


@needs_tools
def test_a_rewritten_cast_still_meets_the_ub_check():
    r = pipeline.run_pipeline(_ttir("bf16_to_fp16", 65536), False, "bf16_to_fp16", TOOLS)
    assert r["status"] == "refused" and any(UB in e for e in r["errors"]), r["errors"]


@needs_tools
@pytest.mark.parametrize("name", ["cached_load", "descriptor_copy", "store_then_barrier"])
def test_ttir_the_320_adapter_cannot_parse_is_cannot_lower_never_refused(name, monkeypatch):
    monkeypatch.setattr(ttir_forms, "to_320", lambda text: (text, []))     # as if no rewrite knew the form
    with pytest.raises(CannotLower) as e:
        pipeline.run_pipeline(_ttir(name), False, name, TOOLS)
    assert f"cannot lower kernel {name}" in str(e.value) and "not the compiler's verdict" in str(e.value)


@needs_tools
@pytest.mark.parametrize("version", ["3.8.0", "3.9.0"])
def test_on_stock_triton_38_and_39_the_kernels_compile_end_to_end(version):
    py = os.path.join(ROOT, f".venv-triton-{version}", "bin", "python")
    if not os.path.exists(py):
        pytest.skip(f"no .venv-triton-{version} (bash scripts/triton_venv.sh {version} makes it)")
    script = ("import sys; from triton_dist.cli import main; rc = [main(['npu-compile', f'{sys.argv[1]}::' + a, '-s', s,"
              " '-c', c]) for a, s, c in [('cached_load', 'x_ptr=*fp32,n=i32', 'BLOCK=64'),"
              " ('bf16_to_fp16', 'x_ptr=*bf16,y_ptr=*fp16', 'BLOCK=64'),"
              " ('descriptor_copy', 'x_ptr=*fp32,y_ptr=*fp32,M=i32,N=i32', 'BLOCK=16'),"
              " ('store_then_barrier', 'x_ptr=*fp32', 'BLOCK=64')]]; print('RC', rc)")
    proc = subprocess.run([py, "-W", "ignore", "-c", script, HERE], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert "RC [0, 0, 0, 0]" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]


# --- arguments, targets, paths: exit 2 with one line, never a refusal ---------------------------------------
ADD = [f"{HERE}::add_one", "-s", "x_ptr=*fp32,n=i32"]


@needs_tools
def test_a_relative_keep_directory_keeps_the_stages_and_the_kernel_is_accepted(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc, out, err = _cli(capsys, *ADD, "-c", "BLOCK=64", "--keep", "stages")
    assert rc == 0 and out.startswith("accepted"), out + err
    assert (tmp_path / "stages" / "kernel.ttadapter.mlir").exists()
    assert (tmp_path / "stages" / "kernel.convert-hivm-to-std.mlir").exists()


@needs_tools
def test_keep_naming_a_file_is_exit_2_with_one_line(tmp_path, capsys):
    f = tmp_path / "a_file"
    f.write_text("")
    rc, out, err = _cli(capsys, *ADD, "-c", "BLOCK=64", "--keep", str(f))
    assert rc == 2 and "is not a directory" in err and "Traceback" not in err and len(err.splitlines()) == 1, err


@needs_tools
@pytest.mark.parametrize("target", ["ascend910b4", "Ascend910X"])
def test_an_unknown_target_is_exit_2_naming_bishengirs_targets(target, capsys):
    rc, out, err = _cli(capsys, *ADD, "-c", "BLOCK=64", "--target", target)
    assert rc == 2 and not out, out
    assert f"unknown NPU target {target!r}" in err and "Ascend910B4" in err and "refuses" not in err, err
    # the targets named are bishengir-compile's own
    listed = subprocess.run([TOOLS.compiler, "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "=Ascend910B2C" in listed and "Ascend910B2C" in err


@needs_tools
def test_a_valid_other_target_compiles(capsys):
    rc, out, err = _cli(capsys, *ADD, "-c", "BLOCK=64", "--target", "Ascend910B2")
    assert rc == 0 and "--target Ascend910B2" in out, out + err


@needs_tools
def test_a_mistyped_target_variable_fails_the_launch_check_and_is_never_cached(tmp_path, monkeypatch):
    from triton_dist.kernel_launches import Launch
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", str(tmp_path))
    monkeypatch.setenv(compile_check.TARGET_ENV, "ascend910b4")
    monkeypatch.delenv(compile_check.SOURCES_ENV, raising=False)
    monkeypatch.delenv(compile_check.LOG_ENV, raising=False)
    status, why = compile_check.check(add_one.fn, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64})
    assert status == "error" and "unknown NPU target 'ascend910b4'" in why, (status, why)
    assert not list(tmp_path.rglob("*.json")), "a verdict was cached"
    launch = Launch(add_one.fn, {"x_ptr": __import__("torch").zeros(64), "n": 64, "BLOCK": 64}, ("BLOCK",))
    with pytest.raises(compile_check.NpuCompileCheckError, match="could not run"):
        compile_check.check_launch(launch)


def test_a_plain_function_is_exit_2_expected_a_triton_jit_kernel(capsys):
    rc, out, err = _cli(capsys, f"{HERE}::not_jitted", "-s", "x_ptr=*fp32,n=i32", "-c", "BLOCK=64")
    assert rc == 2 and "expected a @triton.jit kernel" in err and not out, out + err


def test_a_constexpr_that_is_not_a_value_is_exit_2_naming_it(capsys):
    rc, out, err = _cli(capsys, *ADD, "-c", "BLOCK=abc")
    assert rc == 2 and "--constexpr BLOCK=abc" in err and "dtype" not in err and not out, out + err


@needs_tools
def test_a_constexpr_naming_a_jit_function_of_the_file_is_that_function(capsys):
    rc, out, err = _cli(capsys, f"{HERE}::apply", "-s", "x_ptr=*fp32,out_ptr=*fp32,n=i32", "-c", "ACT=ACT_BIG")
    assert rc == 1 and UB in out and "ACT=act" in out, out + err


# --- a cache that cannot be used: compile without it, a check that could not run never passes --------------
def _unusable_cache(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    return str(blocker / "cache")             # a path under a file


@needs_tools
def test_an_unusable_cache_still_compiles_and_refuses_the_overflow(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", _unusable_cache(tmp_path))
    monkeypatch.delenv(compile_check.TARGET_ENV, raising=False)
    monkeypatch.delenv(compile_check.LOG_ENV, raising=False)
    status, out = compile_check.check(add_one.fn, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 131072})
    assert status == "refused" and any(UB in e for e in out.errors), (status, out)
    status, out = compile_check.check(add_one.fn, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64})
    assert status == "accepted", (status, out)
    err = capsys.readouterr().err
    assert err.count("compiling without the cache") == 1 and "cannot be used" in err, err


def test_compile_kernel_with_an_unusable_cache_raises_before_compiling(tmp_path, monkeypatch):
    if TOOLS.missing:
        pytest.skip("; ".join(TOOLS.missing))
    monkeypatch.setattr(pipeline, "_compile", lambda *a, **k: pytest.fail("compiled with a cache it cannot use"))
    with pytest.raises(vcache.CacheUnavailable, match="cannot be used"):
        pipeline.compile_kernel(add_one, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64},
                                cache=vcache.Cache(_unusable_cache(tmp_path)))


def test_a_check_that_could_not_run_fails_the_launch(tmp_path, monkeypatch):
    from triton_dist.kernel_launches import Launch
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", str(tmp_path))
    monkeypatch.delenv(compile_check.TARGET_ENV, raising=False)
    monkeypatch.delenv(compile_check.SOURCES_ENV, raising=False)
    monkeypatch.delenv(compile_check.LOG_ENV, raising=False)
    monkeypatch.setattr(pipeline.toolchain, "find", lambda: TOOLS if not TOOLS.missing else pytest.skip("no tools"))

    def broken(*a, **k):
        raise RuntimeError("a fault of the checker")
    monkeypatch.setattr(pipeline, "_compile", broken)
    launch = Launch(add_one.fn, {"x_ptr": __import__("torch").zeros(64), "n": 64, "BLOCK": 32}, ("BLOCK",))
    with pytest.raises(compile_check.NpuCompileCheckError, match="could not run: internal error"):
        compile_check.check_launch(launch)


# --- the same defects elsewhere ----------------------------------------------------------------------------
def test_triton_ascends_libtriton_reads_newer_ttir_in_its_own_form():
    """Kernels with non-power-of-two shapes run their TTIR passes in triton-ascend 3.2.0's libtriton
    (backend_ascend/ascend_ttir.py), which cannot parse 3.9's cachePolicy attribute either."""
    from triton_dist.backend_ascend import ascend_ttir
    if not os.path.exists(ascend_ttir.cached_libtriton()):
        pytest.skip(f"triton-ascend's libtriton is not fetched ({ascend_ttir.cached_libtriton()})")
    text = ascend_ttir.run_passes(_ttir("cached_load"), "cached_load")
    assert "cacheModifier = cg evictionPolicy = evict_last" in text, text


def test_lower_refuses_a_plain_function_and_a_bare_word_constexpr(capsys):
    try:
        rc = main(["lower", f"{HERE}::not_jitted", "-s", "x_ptr=*fp32,n=i32", "-c", "BLOCK=64"])
    except SystemExit as e:
        rc = e.code
    assert rc == 2 and "expected a @triton.jit kernel" in capsys.readouterr().err
    try:
        rc = main(["lower", *ADD, "-c", "BLOCK=abc"])
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and "--constexpr BLOCK=abc" in err, err


def test_the_cuda_device_library_under_an_unwritable_cache_is_one_line(tmp_path, monkeypatch):
    pytest.importorskip("llvmlite")
    from triton_dist.backend_cuda import devlib
    from triton_dist.errors import TritonDistError
    monkeypatch.setenv("TRITON_DIST_CACHE_DIR", _unusable_cache(tmp_path))
    with pytest.raises(TritonDistError, match="set TRITON_DIST_CACHE_DIR to a writable directory"):
        devlib.bitcode_path()


def test_the_session_summary_counts_the_checks_that_could_not_run(tmp_path):
    import json
    from triton_dist.pytest_plugin import npu_compile_summary
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"key": "skip:k", "kernel": "add_one", "status": "error",
                               "reason": "the NPU compile check could not run: unknown NPU target"}) + "\n")
    line = npu_compile_summary(str(log))
    assert "1 could not be checked" in line and "add_one" in line, line


@needs_tools
def test_the_launch_checks_memo_does_not_serve_an_edited_constexpr_function(tmp_path, monkeypatch):
    """The launch check keeps verdicts per process too: ACT=act accepted, then `act` edited (a new
    function of the same name, so the same repr) must be compiled again and refused."""
    import torch
    from triton_dist.kernel_launches import Launch
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", str(tmp_path))
    for var in (compile_check.TARGET_ENV, compile_check.SOURCES_ENV, compile_check.LOG_ENV):
        monkeypatch.delenv(var, raising=False)

    def launch(fn):
        return Launch(apply.fn, {"x_ptr": torch.zeros(4), "out_ptr": torch.zeros(4), "n": 4, "ACT": fn}, ("ACT",))
    compile_check.check_launch(launch(ACT_SMALL))
    with pytest.raises(compile_check.NpuCompileError, match=UB):
        compile_check.check_launch(launch(ACT_BIG))


@pytest.mark.parametrize("broken", ["adapter", "compiler"])
def test_a_tool_that_fails_without_a_word_is_exit_2_not_a_refusal(broken, monkeypatch, capsys):
    if TOOLS.missing:
        pytest.skip("; ".join(TOOLS.missing))
    false = "/bin/false"
    if not os.access(false, os.X_OK):
        pytest.skip("no /bin/false")
    env = toolchain.ADAPTER_ENV if broken == "adapter" else toolchain.COMPILER_ENV
    monkeypatch.setenv(env, false)
    rc, out, err = _cli(capsys, *ADD, "-c", "BLOCK=64")
    assert rc == 2 and "printed nothing" in err and "refuses" not in out, out + err


@needs_tools
def test_an_option_value_bishengir_cannot_take_is_exit_2(capsys):
    rc, out, err = _cli(capsys, *ADD, "-c", "BLOCK=64", "--option", "multibuffer=abc")
    assert rc == 2 and "command line was refused" in err and "refuses kernel" not in out, out + err


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def add_one_tuned(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


def _launch_tuned():
    import torch
    x = torch.zeros(256)
    add_one_tuned[lambda meta: (triton.cdiv(256, meta["BLOCK"]),)](x, 256)
    return float(x.sum())


@needs_tools
def test_an_autotuned_launch_whose_check_could_not_run_says_so_not_that_configs_are_refused(tmp_path, monkeypatch):
    import triton_dist
    from triton_dist.errors import RankError
    for var in ("TRITON_DIST_LAUNCH_CHECKS", compile_check.SOURCES_ENV, compile_check.LOG_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", str(tmp_path))
    monkeypatch.setenv(compile_check.TARGET_ENV, "ascend910b4")
    with pytest.raises(RankError) as e:
        triton_dist.launch(_launch_tuned, world_size=1, npu_compile=True)
    assert e.value.exc_type == "NpuCompileCheckError", e.value.message
    assert "could not run" in e.value.message and "refuses" not in e.value.message, e.value.message


@pytest.mark.parametrize("broken", ["adapter", "compiler"])
def test_a_tool_that_cannot_be_started_is_exit_2_with_one_line(broken, tmp_path, monkeypatch, capsys):
    if TOOLS.missing:
        pytest.skip("; ".join(TOOLS.missing))
    junk = tmp_path / "not-a-binary"
    junk.write_bytes(b"\x00\x01junk")
    junk.chmod(0o755)                   # executable, but no format the kernel can start: Exec format error
    env = toolchain.ADAPTER_ENV if broken == "adapter" else toolchain.COMPILER_ENV
    monkeypatch.setenv(env, str(junk))
    rc, out, err = _cli(capsys, *ADD, "-c", "BLOCK=64")
    assert rc == 2 and "cannot be run" in err and len(err.splitlines()) == 1, out + err


_OPAQUE = None


@triton.jit
def reads_an_opaque_global(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + (1 if _OPAQUE is None else 2))


def test_the_source_key_is_the_same_in_every_process(monkeypatch):
    """Under the simulator a kernel's globals hold objects without a stable text (its interpreter
    semantic: a repr with an address); keyed by that, every process had its own key and the disk cache
    never answered (test_npu_compile.py's two-session test).  Two objects of that kind: one key."""
    from triton_dist.backend_ascend.source_key import source_key
    opaque = type("Semantic", (), {"__module__": "triton.language.semantic"})
    monkeypatch.setitem(globals(), "_OPAQUE", opaque())
    first = source_key(reads_an_opaque_global)
    monkeypatch.setitem(globals(), "_OPAQUE", opaque())
    assert source_key(reads_an_opaque_global) == first


@triton.jit
def calls_cuda_libdevice(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.extra.libdevice.tanh(tl.load(x_ptr + offs)))


@needs_tools
def test_a_cuda_libdevice_call_is_cannot_lower_not_a_refusal(capsys):
    """Stock Triton resolves tl.extra.libdevice to CUDA's __nv_tanhf here; triton-ascend's frontend to its
    __hmf_tanhf: the 3.2.0 adapter's refusal of __nv_ was no verdict on the kernel."""
    rc, out, err = _cli(capsys, f"{HERE}::calls_cuda_libdevice", "-s", "x_ptr=*fp32,y_ptr=*fp32", "-c", "BLOCK=16")
    assert rc == 2 and "CUDA's libdevice (__nv_tanhf)" in err and "refuses" not in out, out + err


@triton.jit
def assumes(x_ptr, n, BLOCK: tl.constexpr):
    tl.assume(n > 0)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@needs_tools
def test_a_construct_the_320_adapter_cannot_parse_is_cannot_lower_naming_it(capsys):
    rc, out, err = _cli(capsys, f"{HERE}::assumes", "-s", "x_ptr=*fp32,n=i32", "-c", "BLOCK=16")
    assert rc == 2 and "cannot lower kernel assumes" in err and "llvm.intr.assume" in err, out + err
    assert "refuses" not in out
