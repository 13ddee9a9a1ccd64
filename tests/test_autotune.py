"""@triton.autotune and @triton.heuristics on the simulator and through the real NPU compilers.

Oracles: torch for what the kernels compute; Triton's documented autotuner behaviour for the
hooks (reset_to_zero, restore_value, key, prune_configs_by); the real compilers' verdicts
(triton-ascend 3.2.0's triton-adapter-opt, AscendNPU-IR 1.2.0's bishengir-compile: `ub
overflow`) for npu-compile.  The kernels follow the style of triton-ascend's tutorials and
autotune tests (third_party/ascend/tutorials/06-demo-autotune.py, unittest/autotune_ut/).
"""
import os

import pytest
import torch
import triton
import triton.language as tl

import triton_dist  # noqa: F401  (the simulator runs this process's kernels)
from triton_dist.backend_ascend import toolchain
from triton_dist.cli import main

HERE = os.path.abspath(__file__)
TOOLS = toolchain.find()
needs_tools = pytest.mark.skipif(bool(TOOLS.missing), reason="; ".join(TOOLS.missing))
REF = "TRITON_DIST_AUTOTUNE_REFERENCE"


# --- kernels -----------------------------------------------------------------------------------------------
@triton.autotune(configs=[triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}),
                          triton.Config({"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 32}, num_warps=8),
                          triton.Config({"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 8}, num_stages=2)],
                 key=["M", "N", "K"])
@triton.jit
def matmul(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BLOCK_N)
    rm = (pid // grid_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % grid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(a + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        y = tl.load(b + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _mm_grid(meta, M, N):
    return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)


@triton.autotune(configs=[triton.Config({"BLOCK_N": 64}), triton.Config({"BLOCK_N": 128})], key=["n_cols"])
@triton.jit
def softmax(x, y, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    v = tl.load(x + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y + row * n_cols + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


SMALL = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]


# the grid covers n // BLOCK blocks: the tail of n is left out unless BLOCK divides n
@triton.autotune(configs=SMALL, key=["n"])
@triton.jit
def scale_floor_grid(x, y, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + off, tl.load(x + off, mask=off < n) * 2, mask=off < n)


@triton.autotune(configs=SMALL, key=["n"])
@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + off, tl.load(x + off, mask=off < n) * 2, mask=off < n)


@triton.jit
def _add_one_in_place(x, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + off, tl.load(x + off, mask=off < n) + 1, mask=off < n)


add_one_restored = triton.autotune(configs=SMALL, key=["n"], restore_value=["x"])(_add_one_in_place)
add_one_unrestored = triton.autotune(configs=SMALL, key=["n"])(_add_one_in_place)


@triton.jit
def _sum_into(x, out, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out, tl.sum(tl.load(x + off, mask=off < n, other=0.0), axis=0))


sum_reset = triton.autotune(configs=SMALL, key=["n"], reset_to_zero=["out"])(_sum_into)
sum_not_reset = triton.autotune(configs=SMALL, key=["n"])(_sum_into)


# autotune over heuristics (the order of triton-ascend's tutorials: the config sets BLOCK, the
# heuristic derives EVEN from it)
@triton.autotune(configs=SMALL, key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def scale_even(x, y, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(y + off, tl.load(x + off) * 3)
    else:
        tl.store(y + off, tl.load(x + off, mask=off < n) * 3, mask=off < n)


# the simulator's out-of-bounds check sees a config that reads past the tensor
@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def unmasked_copy(x, y, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + off, tl.load(x + off))


# for npu-compile: one config overflows the unified buffer (the 65536 x fp32 tiles of a masked add
# need 4194304 bits of UB, tests/test_npu_compile.py)
@triton.autotune(configs=[triton.Config({"BLOCK": 1024}), triton.Config({"BLOCK": 65536}, num_warps=8)], key=["n"])
@triton.jit
def add_tuned(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(out_ptr + off, tl.load(x_ptr + off, mask=m) + tl.load(y_ptr + off, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 65536}), triton.Config({"BLOCK": 1024}),
                          triton.Config({"BLOCK": 131072})], key=["n"])
@triton.jit
def add_tuned_two_big(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(out_ptr + off, tl.load(x_ptr + off, mask=m) + tl.load(y_ptr + off, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 1024})], key=["n"])
@triton.jit
def add_tuned_small(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(out_ptr + off, tl.load(x_ptr + off, mask=m) + tl.load(y_ptr + off, mask=m), mask=m)


# a config the frontend refuses (Triton's autotuner drops a config failing a static assert, too)
@triton.autotune(configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 2048})], key=["n"])
@triton.jit
def add_asserted(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 1024)
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(out_ptr + off, tl.load(x_ptr + off, mask=m) + tl.load(y_ptr + off, mask=m), mask=m)


# a config kwarg that is a compile option of triton-ascend, as its AutoTilingTuner adds `multibuffer`
@triton.autotune(configs=[triton.Config({"BLOCK": 16, "multibuffer": False}),
                          triton.Config({"BLOCK": 32, "multibuffer": True})], key=["n"])
@triton.jit
def scale_multibuffer(x, y, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + off, tl.load(x + off, mask=off < n) * 2, mask=off < n)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["N_COLS"])})
@triton.jit
def row_sum_heuristic(x_ptr, out_ptr, N_COLS: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.program_id(0),
             tl.sum(tl.load(x_ptr + tl.program_id(0) * N_COLS + cols, mask=cols < N_COLS, other=0.0), axis=0))


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
@triton.jit
def heuristic_of_a_runtime_int(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(out_ptr + cols, tl.load(x_ptr + cols, mask=cols < n), mask=cols < n)


# --- the simulator -----------------------------------------------------------------------------------------
def test_an_autotuned_matmul_runs_every_config_and_matches_torch(monkeypatch):
    monkeypatch.delenv(REF, raising=False)
    torch.manual_seed(0)
    M, N, K = 40, 48, 64               # tails in M and N for every config
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.zeros(M, N)
    matmul[lambda meta: _mm_grid(meta, M, N)](a, b, c, M, N, K)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    assert matmul.best_config.kwargs == {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}   # the reference: the first


def test_an_autotuned_softmax_matches_torch():
    x = torch.randn(6, 50)
    y = torch.empty_like(x)
    softmax[(6,)](x, y, 50)
    torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


def test_a_config_that_computes_something_else_is_named_with_its_first_differing_element(monkeypatch):
    monkeypatch.delenv(REF, raising=False)
    from triton_dist.sim.autotune import AutotuneMismatch
    # n=48: BLOCK=16 covers all 48 elements, BLOCK=32 only the first 32 (48 // 32 = 1 block)
    x, y = torch.arange(48, dtype=torch.float32), torch.zeros(48)
    with pytest.raises(AutotuneMismatch) as e:
        scale_floor_grid[lambda meta: (48 // meta["BLOCK"],)](x, y, 48)
    msg = str(e.value)
    assert "configs[1] (BLOCK=32): y[32] = 0.0 where the reference has 64.0" in msg, msg
    assert "(16 of 48 elements of y differ)" in msg and "reference configs[0] (BLOCK=16)" in msg, msg


def test_configs_that_agree_are_not_reported():
    x, y = torch.arange(48, dtype=torch.float32), torch.zeros(48)
    scale[lambda meta: (triton.cdiv(48, meta["BLOCK"]),)](x, y, 48)
    assert torch.equal(y, x * 2)


def test_the_reference_config_can_be_chosen(monkeypatch):
    from triton_dist.sim.autotune import AutotuneMismatch
    monkeypatch.setenv(REF, "scale_floor_grid:1")
    x, y = torch.arange(80, dtype=torch.float32), torch.zeros(80)
    with pytest.raises(AutotuneMismatch) as e:
        scale_floor_grid[lambda meta: (80 // meta["BLOCK"],)](x, y, 80)
    msg = str(e.value)
    assert "reference configs[1] (BLOCK=32) (chosen by TRITON_DIST_AUTOTUNE_REFERENCE)" in msg, msg
    assert "configs[0] (BLOCK=16): y[64] = 128.0 where the reference has 0.0" in msg, msg
    # the chosen reference is the tuned config, whose outputs the caller sees
    monkeypatch.setenv(REF, "1")
    x, y = torch.arange(64, dtype=torch.float32), torch.zeros(64)
    scale[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](x, y, 64)
    assert scale.best_config.kwargs == {"BLOCK": 32} and torch.equal(y, x * 2)
    monkeypatch.setenv(REF, "7")
    with pytest.raises(triton_dist.TritonDistError, match=r"chooses configs\[7\] of kernel scale, which has 2 configs"):
        scale[lambda meta: (triton.cdiv(65, meta["BLOCK"]),)](x, y, 65)


def test_restore_value_keeps_configs_from_seeing_each_others_updates(monkeypatch):
    monkeypatch.delenv(REF, raising=False)
    from triton_dist.sim.autotune import AutotuneMismatch
    x = torch.arange(40, dtype=torch.float32)
    add_one_restored[lambda meta: (triton.cdiv(40, meta["BLOCK"]),)](x, 40)
    # every config ran from the same x; the final launch of the tuned config made x + 1, as on a device
    assert torch.equal(x, torch.arange(40, dtype=torch.float32) + 1)
    x = torch.arange(40, dtype=torch.float32)
    with pytest.raises(AutotuneMismatch, match=r"the final launch of the tuned config configs\[0\] \(BLOCK=16\), "
                                               r"(.|\n)*made x\[0\] = 2.0 where the same config gave 1.0(.|\n)*"
                                               r"Name 'x' in restore_value="):
        add_one_unrestored[lambda meta: (triton.cdiv(40, meta["BLOCK"]),)](x, 40)


def test_reset_to_zero_is_applied_before_every_config_and_the_final_launch(monkeypatch):
    monkeypatch.delenv(REF, raising=False)
    from triton_dist.sim.autotune import AutotuneMismatch
    x = torch.rand(100)
    out = torch.zeros(1)
    sum_reset[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
    torch.testing.assert_close(out[0], x.sum(), rtol=1e-5, atol=1e-5)
    out = torch.zeros(1)
    with pytest.raises(AutotuneMismatch, match=r"the final launch (.|\n)* made out\[0\] = (.|\n)*"
                                               r"Name 'out' in restore_value= \(an argument updated in place\) or "
                                               r"reset_to_zero="):
        sum_not_reset[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)


def test_configs_are_run_once_per_tuning_key_and_pruned_as_triton_prunes(monkeypatch):
    monkeypatch.delenv(REF, raising=False)
    runs = []

    def hook(i):
        return lambda nargs: runs.append(i)
    configs = [triton.Config({"BLOCK": 16}, pre_hook=hook(0)), triton.Config({"BLOCK": 32}, pre_hook=hook(1)),
               triton.Config({"BLOCK": 64}, pre_hook=hook(2))]
    prune = {"early_config_prune": lambda cfgs, nargs, **kw: [c for c in cfgs if c.kwargs["BLOCK"] <= nargs["n"]]}
    kernel = triton.autotune(configs=configs, key=["n"], prune_configs_by=prune)(scale.fn)
    grid = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)  # noqa: E731
    x, y = torch.arange(64, dtype=torch.float32), torch.zeros(64)
    kernel[grid](x, y, 40)
    assert runs == [0, 1, 0]              # BLOCK=64 > n pruned; each config once; then the tuned one (the first)
    kernel[grid](x, y, 40)
    assert runs == [0, 1, 0, 0]           # the same key: the tuned config only
    kernel[grid](x, y, 64)
    assert runs == [0, 1, 0, 0, 0, 1, 2, 0]
    assert torch.equal(y, x * 2)


def test_heuristics_under_autotune_get_their_computed_constexprs(monkeypatch):
    monkeypatch.delenv(REF, raising=False)
    x = torch.arange(40, dtype=torch.float32)
    y = torch.zeros(40)
    # n=40: EVEN is False for both configs (the masked branch); n=32 would make both EVEN
    scale_even[lambda meta: (triton.cdiv(40, meta["BLOCK"]),)](x, y, 40)
    assert torch.equal(y, x * 3)
    y = torch.zeros(64)
    scale_even[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](torch.arange(64, dtype=torch.float32), y, 64)
    assert torch.equal(y, torch.arange(64, dtype=torch.float32) * 3)


def test_a_kernel_error_of_one_config_names_the_config(monkeypatch):
    monkeypatch.delenv(REF, raising=False)
    x, y = torch.zeros(32), torch.zeros(32)
    with pytest.raises(Exception, match=r"autotuned kernel unmasked_copy, configs\[1\] \(BLOCK=64\): ") as e:
        unmasked_copy[lambda meta: (triton.cdiv(32, meta["BLOCK"]),)](x, y, 32)
    assert "out of bounds" in str(e.value) or "outside" in str(e.value), str(e.value)


# --- npu-compile over every config ---------------------------------------------------------------------------
ADD_SIG = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32"
UB_LINE = "error: ub overflow, requires 4194304 bits while 1572864 bits available!"


def _cli(capsys, *args):
    try:
        rc = main(["npu-compile", *args])
    except SystemExit as e:          # a usage error: argparse's exit
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@needs_tools
def test_npu_compile_compiles_every_config_and_reports_the_one_that_overflows_ub(capsys):
    rc, out, _ = _cli(capsys, f"{HERE}::add_tuned", "-s", ADD_SIG)
    assert rc == 1, out
    assert "configs[0] (BLOCK=1024): accepted: kernel add_tuned" in out, out
    assert "configs[1] (BLOCK=65536, num_warps=8): refused" in out, out
    assert UB_LINE in out                                 # the compiler's own line
    assert "1 of 2 configs accepted; refused: configs[1] (BLOCK=65536, num_warps=8)" in out, out


@needs_tools
def test_npu_compile_accepts_an_autotuned_kernel_whose_configs_all_fit(capsys):
    rc, out, _ = _cli(capsys, f"{HERE}::add_tuned_small", "-s", ADD_SIG)
    assert rc == 0, out
    assert "2 of 2 configs accepted" in out and "refused" not in out, out


@needs_tools
def test_npu_compile_gives_a_heuristics_kernel_its_computed_constexprs(capsys, tmp_path):
    rc, out, _ = _cli(capsys, f"{HERE}::row_sum_heuristic", "-s", "x_ptr=*fp32,out_ptr=*fp32", "-c", "N_COLS=20")
    assert rc == 0, out
    assert "accepted: kernel row_sum_heuristic" in out and "BLOCK=32" in out, out


@needs_tools
def test_a_config_without_a_verdict_is_reported_and_the_others_compiled(capsys):
    rc, out, _ = _cli(capsys, f"{HERE}::add_asserted", "-s", ADD_SIG)
    assert rc == 2, out
    assert "configs[0] (BLOCK=512): accepted" in out, out
    assert "configs[1] (BLOCK=2048): no verdict" in out and "static_assert" in out, out
    assert "1 of 2 configs accepted; no verdict: configs[1] (BLOCK=2048)" in out, out


@needs_tools
def test_a_config_kwarg_that_is_a_compile_option_reaches_the_compiler_flags(capsys, tmp_path):
    rc, out, _ = _cli(capsys, f"{HERE}::scale_multibuffer", "-s", "x=*fp32,y=*fp32,n=i32", "--keep", str(tmp_path))
    assert rc == 0 and "2 of 2 configs accepted" in out, out
    assert "--enable-auto-multi-buffer=False" in (tmp_path / "config0" / "bishengir-compile.cmd").read_text()
    assert "--enable-auto-multi-buffer=True" in (tmp_path / "config1" / "bishengir-compile.cmd").read_text()
    # the simulator runs the kernel's constexprs and leaves the option to the compiler
    x, y = torch.arange(40, dtype=torch.float32), torch.zeros(40)
    scale_multibuffer[lambda meta: (triton.cdiv(40, meta["BLOCK"]),)](x, y, 40)
    assert torch.equal(y, x * 2)


def test_npu_compile_asks_for_a_heuristic_value_it_cannot_compute(capsys):
    rc, out, err = _cli(capsys, f"{HERE}::heuristic_of_a_runtime_int", "-s", "x_ptr=*fp32,out_ptr=*fp32,n=i32")
    assert rc == 2, (out, err)
    assert "reads argument 'n', known here only by its type (i32)" in err, err
    assert "--constexpr BLOCK=VALUE" in err, err


def test_npu_compile_refuses_a_constexpr_the_configs_set(capsys):
    rc, out, err = _cli(capsys, f"{HERE}::add_tuned", "-s", ADD_SIG, "-c", "BLOCK=16")
    assert rc == 2 and "--constexpr BLOCK=... is set by the autotuner's configs" in err, (out, err)


def test_lower_prints_the_module_of_every_config(capsys):
    rc = main(["lower", f"{HERE}::add_tuned", "-s", ADD_SIG])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.index("// configs[0] (BLOCK=1024)") < out.index("// configs[1] (BLOCK=65536, num_warps=8)"), out
    # each module is that config's: its blocks are BLOCK long
    first, second = out.split("// configs[1]")
    assert "tensor<1024xf32>" in first and "65536" not in first, first
    assert "tensor<65536xf32>" in second, second


def _launch_add(kernel):
    x, y, o = torch.arange(4096, dtype=torch.float32), torch.ones(4096), torch.zeros(4096)
    kernel[lambda meta: (triton.cdiv(4096, meta["BLOCK"]),)](x, y, o, 4096)
    return float(o.sum())


@needs_tools
def test_launch_with_npu_compile_fails_naming_the_config_the_compiler_refuses(tmp_path, monkeypatch):
    from triton_dist.errors import RankError
    for k in ("TRITON_DIST_LAUNCH_CHECKS", "TRITON_DIST_NPU_COMPILE_SOURCES", "TRITON_DIST_NPU_COMPILE_LOG", REF):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", str(tmp_path))
    expected = float(sum(range(4096)) + 4096)
    assert triton_dist.launch(_launch_add, add_tuned_small, world_size=1, npu_compile=True).values == [expected]
    with pytest.raises(RankError) as e:
        triton_dist.launch(_launch_add, add_tuned, world_size=1, npu_compile=True)
    assert e.value.exc_type == "NpuCompileError"
    assert "autotuned kernel add_tuned, configs[1] (BLOCK=65536, num_warps=8): " in e.value.message
    assert UB_LINE in e.value.message
    # every refused config is named, the first of the list included; the one that compiles ran
    with pytest.raises(RankError) as e:
        triton_dist.launch(_launch_add, add_tuned_two_big, world_size=1, npu_compile=True)
    msg = e.value.message
    assert "the npu-compile check refuses 2 of 3 configs of autotuned kernel add_tuned_two_big" in msg, msg
    assert "configs[0] (BLOCK=65536): the NPU compiler refuses" in msg and UB_LINE in msg, msg
    assert "configs[2] (BLOCK=131072): the NPU compiler refuses" in msg, msg
    assert "configs[1] (BLOCK=1024)" not in msg, msg


def test_a_replay_line_carries_the_chosen_reference(monkeypatch):
    from triton_dist import launcher
    monkeypatch.setenv(REF, "matmul:2")
    assert f"{REF}=matmul:2 " in launcher.execution_env()


def test_a_static_assert_still_refuses_a_config_after_a_simulator_launch_in_the_same_process(tmp_path):
    """Triton's code generator keys tl.static_assert by identity when first imported; a launch imported it
    while the language was patched for the interpreter, and every later compile of the process skipped
    static_asserts (the config above compiled).  A fresh process: the first import is the launch's."""
    import subprocess
    import sys
    script = tmp_path / "run.py"
    script.write_text(f"""
import sys, torch, triton
sys.path.insert(0, {os.path.dirname(HERE)!r})
import test_autotune as T
x = torch.zeros(32)
T.scale.fn[(2,)](x, torch.zeros(32), 32, BLOCK=16)
from triton_dist.backend_ascend.frontend import build_ttir
try:
    build_ttir(T.add_asserted.fn, {{"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}}, {{"BLOCK": 2048}})
    print("COMPILED")
except triton_dist.TritonDistError as e:
    print("REFUSED", e)
""".replace("import test_autotune as T", "import triton_dist\nimport test_autotune as T"))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert "REFUSED" in run.stdout and "static_assert" in run.stdout, run.stdout + run.stderr
