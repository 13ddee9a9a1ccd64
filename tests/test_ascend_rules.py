"""The Ascend NPU's dtype and op rules on the simulator (triton_dist/language/ascend_rules.py, issue 34).

Each rule, both sides: the correct kernel runs and matches torch; its twin is refused at the kernel
line, with the rule's source and the fix.  And what the real compilers (triton-adapter-opt 3.2.0,
bishengir-compile 1.2.0) say of each twin: refused for fp64 arithmetic and fp64 atomic_add, accepted
for the others (where the table is what catches them before an NPU).
"""
import os

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
from triton_dist.backend_ascend import pipeline, toolchain
from triton_dist.language import ascend_rules

HERE = os.path.basename(__file__)


@triton.jit
def scale(x, out, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out + o, tl.load(x + o) * 2)


@triton.jit
def accumulate(p, v, BLOCK: tl.constexpr, MAX: tl.constexpr):
    o = tl.arange(0, BLOCK)
    if MAX:
        tl.atomic_max(p + o, tl.load(v + o))
    else:
        tl.atomic_add(p + o, tl.load(v + o))


@triton.jit
def or_in_loop(p, v, BLOCK: tl.constexpr, N: tl.constexpr):
    o = tl.arange(0, BLOCK)
    for i in range(N):
        tl.atomic_or(p + o, tl.load(v + i * BLOCK + o))


@triton.jit
def or_after_loop(p, v, BLOCK: tl.constexpr, N: tl.constexpr):
    o = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.int32)
    for i in range(N):
        acc = acc | tl.load(v + i * BLOCK + o)
    tl.atomic_or(p + o, acc)


@triton.jit
def _or_into(p, x):
    tl.atomic_or(p, x)


@triton.jit
def _or_rows(p, v, o, BLOCK: tl.constexpr, N: tl.constexpr):
    for i in range(N):      # the loop is the helper's own: seen as before
        tl.atomic_or(p + o, tl.load(v + i * BLOCK + o))


@triton.jit
def helper_or_in_loop(p, v, BLOCK: tl.constexpr, N: tl.constexpr):
    o = tl.arange(0, BLOCK)
    for i in range(N):
        _or_into(p + o, tl.load(v + i * BLOCK + o))


@triton.jit
def helper_or_after_loop(p, v, BLOCK: tl.constexpr, N: tl.constexpr):
    o = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.int32)
    for i in range(N):
        acc = acc | tl.load(v + i * BLOCK + o)
    _or_into(p + o, acc)


@triton.jit
def helper_with_its_own_loop(p, v, BLOCK: tl.constexpr, N: tl.constexpr):
    _or_rows(p, v, tl.arange(0, BLOCK), BLOCK, N)


@triton.jit
def shifts(x, out, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    v = tl.load(x + o)
    tl.store(out + o, (v >> 3) | (v << 1))


@triton.jit
def permute3(x, out, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, D0: tl.constexpr, D1: tl.constexpr,
             D2: tl.constexpr):
    i = tl.arange(0, A)[:, None, None] * B * C + tl.arange(0, B)[None, :, None] * C + tl.arange(0, C)[None, None, :]
    y = tl.permute(tl.load(x + i), (D0, D1, D2))
    tl.store(out + tl.arange(0, A * B * C), tl.reshape(y, (A * B * C,)))


@triton.jit
def gather2(x, idx, out, A: tl.constexpr, B: tl.constexpr, AXIS: tl.constexpr):
    i = tl.arange(0, A)[:, None] * B + tl.arange(0, B)[None, :]
    tl.store(out + i, tl.gather(tl.load(x + i), tl.load(idx + i), AXIS))


def _line(kernel, text):
    """'file:LINE (kernel)' of the kernel's line holding `text`."""
    import inspect
    lines, first = inspect.getsourcelines(kernel.fn)
    n = next(first + k for k, line in enumerate(lines) if text in line)
    return f"{HERE}:{n} ({kernel.fn.__name__})"


def _run(body):
    return triton_dist.launch(body, world_size=1).values[0]


def _refused(body):
    with pytest.raises(triton_dist.RankError) as e:
        triton_dist.launch(body, world_size=1)
    return str(e.value)


def _assert_refusal(msg, rule, kernel, text):
    r = ascend_rules.RULES[rule]
    assert f"{_line(kernel, text)}: " in msg, msg
    assert r.source in msg and r.fix in msg, msg


# --- each rule, both sides -------------------------------------------------------------------------------
def _scale(dtype):
    x = torch.arange(16, dtype=dtype)
    out = torch.zeros(16, dtype=dtype)
    scale[(1,)](x, out, BLOCK=16)
    return out


def test_fp64_arithmetic_is_refused_fp32_runs():
    torch.testing.assert_close(_run(lambda: _scale(torch.float32)), torch.arange(16, dtype=torch.float32) * 2)
    _assert_refusal(_refused(lambda: _scale(torch.float64)), "fp64", scale, "* 2")


def _accumulate(dtype, use_max):
    p = torch.full((8,), 5, dtype=dtype)
    v = torch.arange(8, dtype=dtype)
    accumulate[(1,)](p, v, BLOCK=8, MAX=use_max)
    return p


@pytest.mark.parametrize("use_max", [False, True])
def test_int64_atomic_add_and_max_are_refused_int32_runs(use_max):
    want = torch.maximum(torch.full((8,), 5), torch.arange(8)) if use_max else 5 + torch.arange(8)
    assert torch.equal(_run(lambda: _accumulate(torch.int32, use_max)), want.to(torch.int32))
    _assert_refusal(_refused(lambda: _accumulate(torch.int64, use_max)), "atomic_int64", accumulate,
                    "atomic_max" if use_max else "atomic_add")


def _or(kernel):
    p = torch.zeros(8, dtype=torch.int32)
    v = (1 << torch.arange(32, dtype=torch.int32)).reshape(4, 8)
    kernel[(1,)](p, v, BLOCK=8, N=4)
    return p


def test_atomic_or_in_a_for_loop_is_refused_once_after_it_runs():
    want = (1 << torch.arange(32, dtype=torch.int32)).reshape(4, 8)
    assert torch.equal(_run(lambda: _or(or_after_loop)), want[0] | want[1] | want[2] | want[3])
    _assert_refusal(_refused(lambda: _or(or_in_loop)), "atomic_in_loop", or_in_loop, "atomic_or")


def _shift(dtype):
    x = torch.tensor([1, 2, 100, 127, 64, 3, 0, 90], dtype=dtype)
    out = torch.zeros(8, dtype=dtype)
    shifts[(1,)](x, out, BLOCK=8)
    return out


def test_unsigned_shifts_are_refused_signed_run():
    x = torch.tensor([1, 2, 100, 127, 64, 3, 0, 90], dtype=torch.int8)
    assert torch.equal(_run(lambda: _shift(torch.int8)), (x >> 3) | (x << 1))
    _assert_refusal(_refused(lambda: _shift(torch.uint8)), "unsigned_shift", shifts, ">> 3")


@triton.jit
def random_bits(out, seed, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out + o, tl.rand(seed, o))


def test_tl_rand_runs_although_its_philox_shifts_a_uint64_seed():
    # Triton's own random.py shifts the uint64 seed (a scalar); the NPU runs tl.rand (outline.md:104-105)
    def body():
        out = torch.full((64,), -1.0)
        random_bits[(1,)](out, 123, BLOCK=64)
        return out
    out = _run(body)
    assert bool(((out >= 0) & (out < 1)).all()) and len(set(out.tolist())) > 60


def _permute(dims):
    x = torch.arange(64, dtype=torch.float32)
    out = torch.zeros(64)
    permute3[(1,)](x, out, A=2, B=4, C=8, D0=dims[0], D1=dims[1], D2=dims[2])
    return out


def test_permute_210_is_refused_adjacent_swaps_run():
    x = torch.arange(64, dtype=torch.float32).reshape(2, 4, 8)
    for dims in ((1, 0, 2), (0, 2, 1)):
        torch.testing.assert_close(_run(lambda: _permute(dims)), x.permute(dims).reshape(-1))
    _assert_refusal(_refused(lambda: _permute((2, 1, 0))), "permute_210", permute3, "tl.permute")


def _gather(axis):
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    idx = torch.randint(0, 4 if axis == 0 else 8, (4, 8), dtype=torch.int32)
    out = torch.zeros(4, 8)
    gather2[(1,)](x, idx, out, A=4, B=8, AXIS=axis)
    return x, idx, out


def test_gather_off_the_last_axis_is_refused_on_it_runs():
    x, idx, out = _run(lambda: _gather(1))
    torch.testing.assert_close(out, torch.gather(x, 1, idx.long()))
    _assert_refusal(_refused(lambda: _gather(0)), "gather_axis", gather2, "tl.gather")


# --- what the real compilers say of each twin ----------------------------------------------------------------
TOOLS = toolchain.find()

TWINS = [  # (kernel, signature, constexprs, the compilers' verdict, a line of their refusal)
    (scale, {"x": "*fp64", "out": "*fp64"}, {"BLOCK": 16}, "refused", "'hivm.hir.vmul' op failed to verify"),
    (accumulate, {"p": "*fp64", "v": "*fp64"}, {"BLOCK": 8, "MAX": False}, "refused",
     "'hivm.hir.atomic_rmw' op failed to verify"),
    (accumulate, {"p": "*i64", "v": "*i64"}, {"BLOCK": 8, "MAX": False}, "accepted", None),
    (accumulate, {"p": "*i64", "v": "*i64"}, {"BLOCK": 8, "MAX": True}, "accepted", None),
    (or_in_loop, {"p": "*i32", "v": "*i32"}, {"BLOCK": 8, "N": 4}, "accepted", None),
    (shifts, {"x": "*u32", "out": "*u32"}, {"BLOCK": 8}, "accepted", None),
    (permute3, {"x": "*fp32", "out": "*fp32"}, dict(A=2, B=4, C=8, D0=2, D1=1, D2=0), "accepted", None),
    (gather2, {"x": "*fp32", "idx": "*i32", "out": "*fp32"}, dict(A=4, B=8, AXIS=0), "accepted", None),
]


@pytest.mark.skipif(bool(TOOLS.missing), reason="; ".join(TOOLS.missing))
@pytest.mark.parametrize("kernel,sig,consts,verdict,line", TWINS,
                         ids=[f"{t[0].fn.__name__}-{'-'.join(t[1].values())}" for t in TWINS])
def test_what_the_real_compilers_say_of_each_twin(kernel, sig, consts, verdict, line):
    # npu-compile traces the twin as it is (the table is the simulator's): the verdict is the compilers'
    out = pipeline.compile_kernel(kernel, sig, consts)
    assert out.status == verdict, out.report()
    if line:
        assert any(line in e for e in out.errors), out.errors


# --- per target: the unsigned-shift rule is A2/A3's; Ascend 950 shifts uint8 (triton-ascend PR #1364) ------
def _uint8_shifted():
    x = torch.tensor([1, 2, 100, 127, 64, 3, 0, 90], dtype=torch.uint8)
    return (x >> 3) | (x << 1)


@pytest.mark.parametrize("env", [ascend_rules.TARGET_ENV, ascend_rules.COMPILE_TARGET_ENV])
def test_a_uint8_shift_runs_for_ascend950_a_uint16_one_is_refused_there(monkeypatch, env):
    monkeypatch.delenv(ascend_rules.TARGET_ENV, raising=False)
    monkeypatch.setenv(env, "Ascend950PR_9599")
    assert torch.equal(_run(lambda: _shift(torch.uint8)), _uint8_shifted())
    msg = _refused(lambda: _shift(torch.uint16))
    _assert_refusal(msg, "unsigned_shift", shifts, ">> 3")
    assert "uint16 tile on Ascend950PR_9599" in msg, msg


def test_a_kernel_meant_for_ascend950_and_910b_is_refused_for_the_910b(monkeypatch):
    monkeypatch.setenv(ascend_rules.TARGET_ENV, "Ascend950PR_9599,Ascend910B4")
    msg = _refused(lambda: _shift(torch.uint8))
    _assert_refusal(msg, "unsigned_shift", shifts, ">> 3")
    assert "uint8 tile on Ascend910B4 (the target" in msg and "Ascend950PR_9599 (" not in msg, msg


# --- the loop rule through @jit helpers: an atomic in a helper called inside a loop runs in that loop ------
def test_atomic_or_in_a_helper_called_in_a_loop_is_refused_called_once_after_it_runs():
    want = (1 << torch.arange(32, dtype=torch.int32)).reshape(4, 8)
    assert torch.equal(_run(lambda: _or(helper_or_after_loop)), want[0] | want[1] | want[2] | want[3])

    def launched_in_a_host_loop():         # the host's loop is not the kernel's: no refusal
        for _ in range(2):
            out = _or(helper_or_after_loop)
        return out
    assert torch.equal(_run(launched_in_a_host_loop), want[0] | want[1] | want[2] | want[3])
    msg = _refused(lambda: _or(helper_or_in_loop))
    _assert_refusal(msg, "atomic_in_loop", _or_into, "atomic_or")
    assert f"in @jit helper _or_into, called inside a for loop at {_line(helper_or_in_loop, '_or_into(')}" in msg, msg
    msg = _refused(lambda: _or(helper_with_its_own_loop))
    _assert_refusal(msg, "atomic_in_loop", _or_rows, "atomic_or")
