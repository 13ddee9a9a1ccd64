"""The kernel library (triton_dist.kernels) against torch.

Why one long file: every op of the library is checked by the same torch oracle and the same
input builders; the cases read best side by side.

Every rank builds the inputs of every rank from the same seeds, so the test process can
rebuild them too and compute the reference with plain torch (in float64 from the very
values the ranks used: bf16 inputs are rounded first).  The ranks draw their inputs on the
CPU and move them to triton_dist.device(); they return their outputs (launch brings them
back to the CPU); the comparisons happen here.

The correctness tests run on each backend of the `backend` fixture (the simulator, and the
GPUs of a session started with TRITON_DIST_BACKEND=cuda --backend cuda); the schedule, race
and lowering tests are about the simulator and the NPU and run only there.
"""
import functools
import time

import pytest
import torch

import triton_dist
from triton_dist import kernels
from triton_dist.kernels import _common
from triton_dist.pytest_plugin import need_ranks

WORLD_SIZES = [1, 2, 3, 4]
OPS = ["all_gather", "reduce_scatter", "all_reduce_one_shot", "all_reduce_ring", "all_to_all", "ag_gemm",
       "gemm_rs"]
SMALL_BLOCKS = dict(block_m=16, block_n=16, block_k=16)


@pytest.fixture(autouse=True)
def _slow_only_when_asked(request):
    """World size 8 is marked slow and runs only when asked for (pytest -m slow)."""
    if request.node.get_closest_marker("slow") and "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("slow: run with -m slow")


# ---- inputs and references (the same code runs in the ranks and in the test process) ---------

def _rand(shape, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def _case_inputs(op, case, n, r, dtype, seed):
    """The arguments rank r passes for (op, case)."""
    s = seed * 1000 + r * 10
    if op == "all_gather":
        return (_rand(case["x"], s, dtype),)
    if op in ("reduce_scatter", "all_to_all"):
        return (_rand((n * case["rows"],) + tuple(case["rest"]), s, dtype),)
    if op.startswith("all_reduce"):
        return (_rand(case["x"], s, dtype),)
    if op == "ag_gemm":
        m, K, N = case["mkn"]
        return _rand((m, K), s, dtype), _rand((K, N), seed * 1000 + 7, dtype)   # b: the same on every rank
    if op == "gemm_rs":
        m, K, N = case["mkn"]
        return _rand((n * m, K), s, dtype), _rand((K, N), s + 1, dtype)
    raise AssertionError(op)


def _on_device(args):
    """Inputs drawn on the CPU (the same values the test process redraws), on this rank's device."""
    dev = triton_dist.device()
    return tuple(a.to(dev) for a in args)


def _call(op, args, **kw):
    if op == "all_reduce_one_shot":
        return kernels.all_reduce(*args, method="one_shot")
    if op == "all_reduce_ring":
        return kernels.all_reduce(*args, method="ring")
    return getattr(kernels, op)(*args, **kw)


def _reference(op, case, n, r, dtype, seed):
    ins = [[a.double() for a in _case_inputs(op, case, n, j, dtype, seed)] for j in range(n)]
    if op == "all_gather":
        return torch.cat([i[0] for i in ins])
    if op == "reduce_scatter":
        rows = case["rows"]
        return sum(i[0] for i in ins)[r * rows:(r + 1) * rows]
    if op.startswith("all_reduce"):
        return sum(i[0] for i in ins)
    if op == "all_to_all":
        rows = case["rows"]
        return torch.cat([i[0][r * rows:(r + 1) * rows] for i in ins])
    if op == "ag_gemm":
        return torch.cat([i[0] for i in ins]) @ ins[0][1]
    if op == "gemm_rs":
        m = case["mkn"][0]
        return sum(i[0] @ i[1] for i in ins)[r * m:(r + 1) * m]
    raise AssertionError(op)


# odd shapes: nothing is a multiple of a tile or block; some cut into several parts/tiles
CASES = {
    "all_gather": [dict(x=(5, 3)), dict(x=(7,)), dict(x=(13, 100))],
    "reduce_scatter": [dict(rows=3, rest=(5,)), dict(rows=1, rest=()), dict(rows=13, rest=(100,))],
    "all_reduce_one_shot": [dict(x=(7, 9)), dict(x=()), dict(x=(1300,))],
    "all_reduce_ring": [dict(x=(7, 9)), dict(x=(3,)), dict(x=(1300,))],
    "all_to_all": [dict(rows=2, rest=(3, 3)), dict(rows=1, rest=()), dict(rows=13, rest=(100,))],
    "ag_gemm": [dict(mkn=(5, 40, 24), kw=SMALL_BLOCKS), dict(mkn=(18, 20, 17), kw=dict(launches=2, **SMALL_BLOCKS)),
                dict(mkn=(3, 7, 5), kw={}),
                # tiles visited in groups of 2 tile rows (the GPU default is 8), a part group at the end
                dict(mkn=(40, 16, 48), kw=dict(group_m=2, block_m=16, block_n=16, block_k=16))],
    "gemm_rs": [dict(mkn=(5, 20, 24), kw=SMALL_BLOCKS), dict(mkn=(18, 20, 17), kw=dict(launches=2, **SMALL_BLOCKS)),
                dict(mkn=(3, 7, 5), kw={}),
                dict(mkn=(40, 16, 48), kw=dict(group_m=2, block_m=16, block_n=16, block_k=16))],
}
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _check(out, ref, dtype, n, what):
    assert isinstance(out, torch.Tensor), what
    assert out.dtype == dtype, f"{what}: dtype {out.dtype}, want {dtype}"
    assert tuple(out.shape) == tuple(ref.shape), f"{what}: shape {tuple(out.shape)}, want {tuple(ref.shape)}"
    # each rank's partial may be rounded once, and the ring rounds once per hop
    scale = max(1.0, ref.abs().max().item()) if ref.numel() else 1.0
    tol = TOL[dtype] * (n + 1) * scale
    torch.testing.assert_close(out.double(), ref, rtol=TOL[dtype], atol=tol, msg=lambda m: f"{what}: {m}")


def _run_cases(op, dtypes, seed=0, cases=None):
    """Rank function: every case of op in every dtype; returns [(case index, dtype, output)]."""
    r, n = triton_dist.rank(), triton_dist.world_size()
    outs = []
    for ci, case in enumerate(cases if cases is not None else CASES[op]):
        for dtype in dtypes:
            args = _on_device(_case_inputs(op, case, n, r, dtype, seed + ci))
            out = _call(op, args, **case.get("kw", {}))
            assert out.device == torch.device(triton_dist.device())
            outs.append((ci, dtype, out))
    return outs


def _verify(op, n, values, seed=0, cases=None):
    cases = cases if cases is not None else CASES[op]
    for r, outs in enumerate(values):
        for ci, dtype, out in outs:
            ref = _reference(op, cases[ci], n, r, dtype, seed + ci)
            _check(out, ref, dtype, n, f"{op} case {cases[ci]} {dtype} rank {r} of {n}")


# ---- every op x world size x dtype, odd shapes -----------------------------------------------

# --compare-backends: a GEMM's tl.dot accumulates in another order on each backend (numpy's
# fp32 matmul here, the tensor cores' MMA on a GPU), so its fp16 partials may round to the
# neighbouring value and the reduce adds such ulps up (measured on one H200: 2 fp16 ulps at 1
# element of 1920 in gemm_rs; docs/cuda.md, "Differential testing")
DOT_ORDER = pytest.mark.compare_tolerance(rtol={"float16": 4e-3})


@pytest.mark.parametrize("n", WORLD_SIZES)
@pytest.mark.parametrize("op", [pytest.param(op, marks=DOT_ORDER) if op.endswith("gemm") or op.startswith("gemm")
                                else op for op in OPS])
def test_op_matches_torch(backend, op, n):
    need_ranks(backend, n)
    dtypes = [torch.float32, torch.bfloat16] + ([torch.float16] if n == 3 else [])
    res = triton_dist.launch(_run_cases, op, dtypes, world_size=n, backend=backend)
    _verify(op, n, res.values)


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_op_matches_torch_8_ranks(backend, op):
    need_ranks(backend, 8)
    cases = CASES[op][:2]
    res = triton_dist.launch(_run_cases, op, [torch.float32, torch.bfloat16], 0, cases, world_size=8,
                             timeout=300, backend=backend)
    _verify(op, 8, res.values, cases=cases)


def test_all_reduce_is_bit_identical_on_every_rank(backend):
    need_ranks(backend, 3)

    def body():
        r = triton_dist.rank()
        x = _rand((1300,), 5 + r, torch.bfloat16).to(triton_dist.device())
        return kernels.all_reduce(x, method="one_shot"), kernels.all_reduce(x, method="ring")
    vals = triton_dist.launch(body, world_size=3, backend=backend).values
    for one, ring in vals[1:]:
        assert torch.equal(one, vals[0][0]) and torch.equal(ring, vals[0][1])


# ---- repeated calls: stale signals must never release a consumer early ------------------------

ALL_KW = {"ag_gemm": dict(kw=SMALL_BLOCKS), "gemm_rs": dict(kw=SMALL_BLOCKS)}


def _repeat_case(op, it):
    """Iteration it of op: new data every time, the shape alternating between two."""
    case = dict(CASES[op][it % 2])
    case["kw"] = dict(case.get("kw", {}))
    return case


def _repeated(ops, iters, skew):
    """Rank function: each op `iters` times in a row (interleaved with the others), new data
    every call.  With skew, ranks sleep different amounts between calls so some run ahead."""
    r, n = triton_dist.rank(), triton_dist.world_size()
    outs = []
    allocs = []
    real_alloc = triton_dist.symm_tensor

    def counting_alloc(shape, dtype):
        allocs.append(len(outs))
        return real_alloc(shape, dtype)

    triton_dist.symm_tensor = counting_alloc
    try:
        for it in range(iters):
            for op in ops:
                case = _repeat_case(op, it)
                args = _on_device(_case_inputs(op, case, n, r, torch.float32, 100 + it))
                outs.append((op, it, _call(op, args, **case["kw"])))
                if skew and (it + r) % 2:
                    time.sleep(0.01 * r)
    finally:
        triton_dist.symm_tensor = real_alloc
    held = kernels.workspace_bytes()
    kernels.free_workspaces()
    return outs, allocs, held, kernels.workspace_bytes()


def _verify_repeated(n, values, ops, iters):
    for r, (outs, allocs, held, after) in enumerate(values):
        assert len(outs) == iters * len(ops)
        for op, it, out in outs:
            case = _repeat_case(op, it)
            ref = _reference(op, case, n, r, torch.float32, 100 + it)
            _check(out, ref, torch.float32, n, f"{op} call {it} rank {r}")
        # workspaces are allocated in the first two rounds (two shapes) and then reused
        assert all(a < 2 * len(ops) for a in allocs), f"symmetric allocations after warm-up at calls {allocs}"
        assert held > 0 and after == 0


@pytest.mark.backend_specific("returns the workspace bytes held, which follow the launch configuration of the "
                              "backend (one program per SM on a GPU, a few on the simulator)")
@pytest.mark.parametrize("n", [2, 3])
def test_each_op_many_times_in_a_row(backend, n):
    need_ranks(backend, n)
    iters = 5
    res = triton_dist.launch(_repeated, OPS, iters, True, world_size=n, backend=backend)
    _verify_repeated(n, res.values, OPS, iters)


@pytest.mark.parametrize("op", OPS)
def test_repeated_calls_have_no_races(op):
    """The race detector (happens-before over signals, barriers and launches, whatever the
    interleaving) finds no unordered conflicting access across 4 back-to-back calls of one
    op: call e+2 reuses call e's phase only after every reader of it is done."""
    res = triton_dist.launch(_repeated, [op], 4, False, world_size=3, race_check=True)
    assert res.races == []
    _verify_repeated(3, res.values, [op], 4)


def test_same_op_back_to_back_with_skewed_ranks(backend):
    """One op 8 times in a row, rank 0 slow: peers run a call ahead into the other phase."""
    n = 4
    need_ranks(backend, n)

    def body():
        r, n = triton_dist.rank(), triton_dist.world_size()
        outs = []
        for it in range(8):
            if r == 0:
                time.sleep(0.02)
            x = _rand((4, 5), 500 + it * 10 + r, torch.float32).to(triton_dist.device())
            outs.append((kernels.all_gather(x), kernels.all_reduce(x, method="ring")))
        return outs
    vals = triton_dist.launch(body, world_size=n, backend=backend).values
    for it in range(8):
        xs = [_rand((4, 5), 500 + it * 10 + j, torch.float32) for j in range(n)]
        for r in range(n):
            ag, ar = vals[r][it]
            assert torch.equal(ag, torch.cat(xs))
            torch.testing.assert_close(ar, sum(xs))


def test_epoch_wraparound_resynchronizes(backend):
    """After EPOCH_MAX calls the slots are zeroed under barriers and epochs restart at 1."""
    n = 3
    need_ranks(backend, n)

    def body():
        _common.EPOCH_MAX = 3
        r, n = triton_dist.rank(), triton_dist.world_size()
        outs = []
        for it in range(8):
            x = _rand((n * 2, 3), 700 + it * 10 + r, torch.float32).to(triton_dist.device())
            outs.append((kernels.reduce_scatter(x), kernels.all_to_all(x)))
        return outs, _common.workspace("reduce_scatter").epoch
    vals = triton_dist.launch(body, world_size=n, backend=backend).values
    for r, (outs, epoch) in enumerate(vals):
        assert epoch == 2                   # 8 calls: 1 2 3 | 1 2 3 | 1 2
        for it, (rs, a2a) in enumerate(outs):
            xs = [_rand((n * 2, 3), 700 + it * 10 + j, torch.float32) for j in range(n)]
            torch.testing.assert_close(rs, sum(xs)[2 * r:2 * r + 2])
            assert torch.equal(a2a, torch.cat([x[2 * r:2 * r + 2] for x in xs]))


# ---- deterministic schedules ---------------------------------------------------------------

SCHED_CASES = {
    "all_gather": [dict(x=(3, 2))],
    "reduce_scatter": [dict(rows=2, rest=(3,))],
    "all_reduce_one_shot": [dict(x=(5,))],
    "all_reduce_ring": [dict(x=(7,))],
    "all_to_all": [dict(rows=1, rest=(3,))],
    "ag_gemm": [dict(mkn=(3, 5, 4), kw=dict(block_m=2, block_n=4, block_k=8))],
    "gemm_rs": [dict(mkn=(3, 5, 4), kw=dict(block_m=2, block_n=4, block_k=8, launches=2))],
}


SCHED_ITERS = 3      # the third call reuses the first call's phase: stale slots would show


def _sched_body(ops):
    r, n = triton_dist.rank(), triton_dist.world_size()
    outs = []
    for it in range(SCHED_ITERS):
        for op in ops:
            case = SCHED_CASES[op][0]
            args = _case_inputs(op, case, n, r, torch.float32, 300 + it)
            outs.append((op, it, _call(op, args, **case.get("kw", {}))))
    return outs


@pytest.mark.parametrize("schedule,seed", [("random", 1), ("random", 2), ("pct", 1), ("pct", 3), ("explore", 0), ("explore", 1)])
def test_ops_under_deterministic_schedules(schedule, seed):
    n = 3
    res = triton_dist.launch(_sched_body, OPS, world_size=n, schedule=schedule, seed=seed, timeout=120)
    for r, outs in enumerate(res.values):
        for op, it, out in outs:
            ref = _reference(op, SCHED_CASES[op][0], n, r, torch.float32, 300 + it)
            _check(out, ref, torch.float32, n, f"{op} call {it} rank {r} ({schedule} seed {seed})")


def test_schedule_is_reproducible():
    ops = ["gemm_rs", "all_reduce_ring"]
    a = triton_dist.launch(_sched_body, ops, world_size=2, schedule="pct", seed=7)
    b = triton_dist.launch(_sched_body, ops, world_size=2, schedule="pct", seed=7)
    assert a.schedule_digest and a.schedule_digest == b.schedule_digest
    for (_, _, x), (_, _, y) in zip(a.values[0], b.values[0]):
        assert torch.equal(x, y)


# ---- bad input: clear errors ----------------------------------------------------------------

def _errors():
    n = triton_dist.world_size()
    dev = triton_dist.device()
    f = functools.partial(torch.zeros, device=dev)
    attempts = {
        "int dtype": lambda: kernels.all_gather(f(4, dtype=torch.int32)),
        "fp64": lambda: kernels.all_reduce(f(4, dtype=torch.float64)),
        "not a tensor": lambda: kernels.all_reduce([1.0, 2.0]),
        "0-d gather": lambda: kernels.all_gather(torch.tensor(1.0, device=dev)),
        "rs rows": lambda: kernels.reduce_scatter(f(n * 2 + 1, 3)),
        "a2a rows": lambda: kernels.all_to_all(f(n * 2 + 1)),
        "method": lambda: kernels.all_reduce(f(4), method="tree"),
        "ag dims": lambda: kernels.ag_gemm(f(4), f(4, 4)),
        "ag K": lambda: kernels.ag_gemm(f(4, 5), f(4, 4)),
        "ag dtypes": lambda: kernels.ag_gemm(f(4, 4), f(4, 4, dtype=torch.bfloat16)),
        "rs M": lambda: kernels.gemm_rs(f(n * 2 + 1, 4), f(4, 4)),
        "launches": lambda: kernels.gemm_rs(f(n * 2, 4), f(4, 4), launches=3),
        "block": lambda: kernels.ag_gemm(f(4, 4), f(4, 4), block_m=24),
    }
    msgs = {}
    for name, fn in attempts.items():
        try:
            fn()
        except triton_dist.TritonDistError as e:
            msgs[name] = str(e)
        else:
            msgs[name] = None
    return msgs


def test_bad_input_gives_clear_errors(backend):
    need_ranks(backend, 2)
    msgs = triton_dist.launch(_errors, world_size=2, backend=backend).values[0]
    assert all(msgs.values()), [k for k, v in msgs.items() if not v]
    assert "torch.int32" in msgs["int dtype"] and "torch.float32" in msgs["int dtype"]
    assert "float64" in msgs["fp64"]
    assert "torch.Tensor" in msgs["not a tensor"]
    assert "at least 1 dimension" in msgs["0-d gather"]
    assert "multiple of the world size (2)" in msgs["rs rows"] and "pad x to 6 rows" in msgs["rs rows"]
    assert "multiple of the world size (2)" in msgs["a2a rows"]
    assert "one_shot" in msgs["method"] and "ring" in msgs["method"]
    assert "exactly 2 dimensions" in msgs["ag dims"]
    assert "K dimension" in msgs["ag K"]
    assert "same dtype" in msgs["ag dtypes"]
    assert "multiple of the world size" in msgs["rs M"]
    assert "launches must be 1" in msgs["launches"]
    assert "power of two" in msgs["block"] and "block_m" in msgs["block"]


def _set_heap_size(monkeypatch, backend, nbytes):
    """Every backend takes a rank's heap size from TRITON_DIST_HEAP_SIZE when the rank starts
    (cuda: 1 GiB default, npu and sim: 256 MiB); the simulator reads it once, at import
    (sim/heap.py), so its default is set too.  A test relying on the size sets it."""
    monkeypatch.setenv("TRITON_DIST_HEAP_SIZE", str(nbytes))
    if backend == "sim":
        from triton_dist.sim import heap
        monkeypatch.setattr(heap, "DEFAULT_HEAP_BYTES", nbytes, raising=False)


def test_workspace_that_does_not_fit_says_what_to_do(backend, monkeypatch):
    need_ranks(backend, 2)
    heap_bytes = 256 << 20
    _set_heap_size(monkeypatch, backend, heap_bytes)
    n = (heap_bytes // 4 + (6 << 20)) // 4    # floats: 2 phases x 2 ranks x (heap/4 + 6 MiB) > heap

    def body():
        dev = triton_dist.device()
        x = torch.empty(n, device=dev)
        msg = None
        try:
            kernels.all_gather(x)
        except triton_dist.TritonDistError as e:
            msg = str(e)
        y = kernels.all_gather(torch.ones(3, device=dev))  # the library still works afterwards
        assert msg is not None, f"an all_gather workspace of 2 x 2 x {n * 4} bytes fit a {heap_bytes}-byte heap"
        assert "kernels.all_gather" in msg and "free_workspaces()" in msg and "TRITON_DIST_HEAP_SIZE" in msg, msg
        # what --compare-backends compares: the message up to the workspace's sizes (its signal
        # capacity is the largest any earlier call of the rank needed: cuda ranks outlive a test)
        return msg.split(" (")[0], y.tolist()
    for head, y in triton_dist.launch(body, world_size=2, backend=backend).values:
        assert head == "kernels.all_gather: no room on the symmetric heap for its workspace", head
        assert y == [1.0] * 6


def test_sizes_beyond_32_bit_offsets_are_refused():
    with pytest.raises(triton_dist.TritonDistError, match="2 GiB.*split the call"):
        _common.check_size("all_gather", 2 ** 29, 4)
    _common.check_size("all_gather", 2 ** 29 - 1, 4)


def test_empty_inputs_return_empty_results(backend):
    need_ranks(backend, 2)

    def body():
        n = triton_dist.world_size()
        f = functools.partial(torch.zeros, device=triton_dist.device())
        return (kernels.all_gather(f(0, 3)).shape, kernels.reduce_scatter(f(0, 2)).shape,
                kernels.all_reduce(f(0), method="ring").shape,
                kernels.ag_gemm(f(2, 0), f(0, 3)).tolist(),
                kernels.gemm_rs(f(2 * n, 0), f(0, 3)).tolist())
    vals = triton_dist.launch(body, world_size=2, backend=backend).values
    for ag, rs, ar, agg, grs in vals:
        assert tuple(ag) == (0, 3) and tuple(rs) == (0, 2) and tuple(ar) == (0,)
        assert agg == [[0.0] * 3] * 4 and grs == [[0.0] * 3] * 2


def test_not_initialized_says_what_to_do(backend):
    # outside launch: no rank, and no device (the test process must not touch a GPU before
    # launch forks the ranks), so the input stays on the CPU
    with pytest.raises(triton_dist.TritonDistError, match="launch"):
        kernels.all_reduce(torch.zeros(4))


# ---- the same kernels compile for the NPU ------------------------------------------------------

def _lowered(kernel, sig, consts):
    import re
    from triton_dist.backend_ascend import lower
    text = lower(kernel, sig, consts)
    return {m.group(2): m.group(1) for m in
            re.finditer(r"hivm\.tcore_type = #hivm\.tcore_type<(\w+)>[^}]*symbol = \"(\w+)\"", text)}, text


@pytest.mark.parametrize("dt,ty", [("bf16", "bfloat16"), ("fp16", "half"), ("fp32", "float")])
def test_kernels_lower_to_aclshmem_calls(dt, ty):
    """Every kernel of the library goes through Triton's frontend and the HIVM lowering."""
    from triton_dist.kernels import collectives as K, gemm as G
    ptrs = {n: f"*{dt}" for n in ("x", "ws", "out", "a", "b")}
    ints = dict(E="i32", PART="i32", epoch="i32", CH="i32", m="i32", N="i32", K="i32", T="i32")
    es = {"bf16": 2, "fp16": 2, "fp32": 4}[dt]
    gemm = dict(BM=32, BN=32, BK=32, UPCAST=False, PREC="tf32", GM=1)

    def sig(*names):
        return {n: ptrs.get(n) or ints.get(n) or "*i32" for n in names}

    cases = [
        (K._gather_kernel, sig("x", "ws", "sig", "out", "E", "PART", "epoch"), dict(SCATTER=True, ES=es, BLOCK=1024),
         {f"aclshmem_{ty}_putmem_signal", "aclshmem_wait_int32", f"aclshmem_consume_token_{ty}_ptr_1d"}),
        (K._reduce_kernel, sig("x", "ws", "sig", "out", "E", "PART", "epoch"), dict(SCATTER=False, ES=es, BLOCK=1024),
         {f"aclshmem_{ty}_putmem_signal", "aclshmemx_signal_op", "aclshmem_wait_int32"}),
        (K._ring_kernel, sig("x", "ws", "sig", "out", "E", "CH", "PART", "epoch"), dict(BLOCK=1024),
         {f"aclshmem_ptr_{ty}", "aclshmem_fence", "aclshmemx_signal_op", "aclshmem_wait_int32"}),
        (G._ag_gemm_kernel, sig("a", "b", "ws", "sig", "out", "m", "N", "K", "T", "epoch"), dict(NP=2, ES=es, **gemm),
         {f"aclshmem_{ty}_putmem_signal", "aclshmem_wait_int32", f"aclshmem_consume_token_{ty}_ptr_1d"}),
        (G._gemm_rs_kernel, sig("a", "b", "ws", "sig", "out", "m", "N", "K", "T", "epoch"), dict(NP=6, **gemm),
         {f"aclshmem_ptr_{ty}", "aclshmem_fence", "aclshmemx_signal_op", "aclshmem_wait_int32"}),
    ]
    for kernel, s, consts, want in cases:
        cores, text = _lowered(kernel, s, consts)
        assert want <= set(cores), (kernel, sorted(cores))
        if "tt.dot" in text:
            # a GEMM kernel: the waits stay in both halves of the cube/vector split
            assert cores["aclshmem_wait_int32"] == "CUBE_AND_VECTOR"


# ---- the examples ------------------------------------------------------------------------------

@pytest.mark.parametrize("example", ["ag_gemm", "gemm_rs", "allreduce_ring"])
def test_example_runs_on_4_simulated_ranks(example):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    p = subprocess.run([sys.executable, str(root / "examples" / f"{example}.py")], capture_output=True, text=True,
                       timeout=300, env=_example_env())
    assert p.returncode == 0, p.stdout + p.stderr
    assert "on 4 ranks: OK" in p.stdout


def test_example_runs_under_torchrun():
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=3",
                        str(root / "examples" / "gemm_rs.py")], capture_output=True, text=True, timeout=300,
                       env=_example_env())
    assert p.returncode == 0, p.stdout + p.stderr
    assert "gemm_rs on 3 ranks: OK" in p.stdout


def _example_env():
    import os
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(TRITON_DIST_BACKEND="sim", OMP_NUM_THREADS="1")
    return env
