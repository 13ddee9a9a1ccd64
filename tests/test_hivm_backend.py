"""Backend "hivm" (backend_ascend/cpu_run/): the kernel as the Ascend compiler made it (the module
bishengir-compile hands to hivmc), run natively on the CPU over the simulator's ranks and heaps,
compared with torch; and the NPU's faults where the compiled code leaves the buffers."""
from __future__ import annotations

import sys
import types

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm


def _missing():
    from triton_dist.backend_ascend.cpu_run.backend import HivmBackend
    return HivmBackend.missing()


pytestmark = pytest.mark.skipif(bool(_missing()), reason=f"backend hivm cannot run here: {'; '.join(_missing())}")


@triton.jit
def masked_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def row_softmax(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=m)


@triton.jit
def every_other(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # triton-ascend #2332's shape: a non-contiguous mask, which the 3.2.0 adapter's
    # DiscreteMaskAccessConversion turns into a load of the whole tile, then a select
    offs = tl.arange(0, BLOCK)
    m = (offs < n) & (offs % 2 == 0)
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, x + 1.0, mask=m)


def _vector_kernels():
    from triton_dist.backend_ascend.cpu_run import backend as hivm
    torch.manual_seed(0)
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.full((1000,), float("nan"))
    masked_add[(triton.cdiv(1000, 64),)](x, y, out, 1000, BLOCK=64)
    a = torch.randn(6, 100)
    o = torch.full_like(a, float("nan"))
    row_softmax[(6,)](a, o, 100, a.stride(0), BLOCK=128)
    return ((out - (x + y)).abs().max().item(), (o - torch.softmax(a, -1)).abs().max().item(), dict(hivm.STAGES))


def test_vector_kernels_run_compiled_and_match_torch():
    (add_err, softmax_err, stages), = triton_dist.launch(_vector_kernels, world_size=1, backend="hivm").values
    assert add_err == 0.0
    assert softmax_err < 1e-6
    # both ran as the module hivmc would get, not interpreted
    assert stages == {"masked_add": "convert-hivm-to-std", "row_softmax": "convert-hivm-to-std"}


def _every_other(size):
    x = torch.randn(size)
    out = torch.zeros(1024)
    every_other[(1,)](x, out, 40, BLOCK=1024)
    ref = torch.zeros(1024)
    ref[:40:2] = x[:40:2] + 1
    return torch.equal(out, ref)


def test_widened_masked_load_faults_as_the_npu_does():
    # x holds the 40 elements the source reads: the compiled load of the whole 1024-lane tile leaves it
    with pytest.raises(Exception) as info:
        triton_dist.launch(_every_other, 40, world_size=1, backend="hivm")
    msg = str(info.value)
    assert "The DDR address of the MTE instruction is out of range" in msg
    assert "argument 'x_ptr' (float32[40])" in msg
    assert "bytes 0..4096 of a 160-byte buffer" in msg
    assert "masked by `m`" in msg and "test_hivm_backend.py:" in msg
    # the other side: with the tile in bounds the same compiled kernel runs and agrees with torch
    assert triton_dist.launch(_every_other, 1024, world_size=1, backend="hivm").values == [True]


@triton.jit
def ring_kernel(src, dst, sig, N: tl.constexpr):
    # dl.rank / num_ranks / symm_at / fence / notify / wait / consume_token: the data goes to the
    # next rank through its symmetric address, then the signal says it is there (the fence orders
    # the store before the signal: without it the simulator's free schedule let the host read dst
    # before the peer's store landed, 1 run in many)
    me = dl.rank()
    n = dl.num_ranks()
    peer = (me + 1) % n
    offs = tl.arange(0, N)
    tl.store(dl.symm_at(dst, peer) + offs, tl.load(src + offs) + me * 1000 + n)
    shm.fence()
    dl.notify(sig, peer, signal=1, sig_op="set")
    token = dl.wait(sig, 1, "gpu", "acquire", waitValue=1)
    dst = dl.consume_token(dst, token)


@triton.jit
def get_kernel(src, dst, N: tl.constexpr):
    shm.getmem(dst, src, N * 4, (dl.rank() + 1) % dl.num_ranks())


def _dist():
    from triton_dist.backend_ascend.cpu_run import backend as hivm
    r, w = triton_dist.rank(), triton_dist.world_size()
    src = triton_dist.symm_tensor((16,), torch.float32)
    dst = triton_dist.symm_tensor((16,), torch.float32)
    got = triton_dist.symm_tensor((16,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    src.copy_(torch.arange(16.0) + 10 * r)
    triton_dist.barrier()
    ring_kernel[(1,)](src, dst, sig, N=16)
    prev, nxt = (r - 1) % w, (r + 1) % w
    ring_ok = torch.equal(dst, torch.arange(16.0) + 10 * prev + prev * 1000 + w)
    triton_dist.barrier()
    get_kernel[(1,)](src, got, N=16)
    get_ok = torch.equal(got, torch.arange(16.0) + 10 * nxt)
    triton_dist.barrier()
    return ring_ok, get_ok, sorted(hivm.STAGES)


def test_dist_ops_run_compiled_on_two_ranks():
    values = triton_dist.launch(_dist, world_size=2, backend="hivm", timeout=120).values
    assert values == [(True, True, ["get_kernel", "ring_kernel"])] * 2


def test_example_allgather_runs_compiled_on_two_ranks():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "hello_allgather.py")
    spec = importlib.util.spec_from_file_location("hello_allgather_hivm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert triton_dist.launch(mod.main, world_size=2, backend="hivm", timeout=120).values == [True, True]


@triton.jit
def scale_shift(x, y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m).to(tl.float32)
    tl.store(y + offs, (a * 2.0 + 1.0).to(y.dtype.element_ty), mask=m)


def _low_precision():
    out = []
    for dt in (torch.bfloat16, torch.float16):
        x = torch.randn(40, generator=torch.Generator().manual_seed(1)).to(dt)
        y = torch.zeros(40, dtype=dt)
        scale_shift[(1,)](x, y, 40, BLOCK=64)
        out.append(torch.equal(y, (x.float() * 2 + 1).to(dt)))
    return out


def test_half_and_bfloat16_loads_casts_and_stores_match_torch():
    # bf16/f16 scalars reach the template calls in SSE registers (jit.ctype), casts round to nearest even
    assert triton_dist.launch(_low_precision, world_size=1, backend="hivm").values == [[True, True]]


@triton.jit
def acc_rows(x, out, n, me, BLOCK: tl.constexpr):
    # the reduction loop of triton_dist/kernels/collectives.py::_reduce_kernel, reduced
    offs = tl.arange(0, BLOCK)
    acc = tl.full((BLOCK,), 0.0, tl.float32)
    for i in range(0, n):
        if i == me:
            acc += tl.load(x + i * BLOCK + offs).to(tl.float32)
        else:
            acc += tl.load(x + i * BLOCK + offs).to(tl.float32)
    tl.store(out + offs, acc.to(out.dtype.element_ty))


def _acc_rows():
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    out = torch.zeros(16, dtype=torch.bfloat16)
    acc_rows[(1,)](x, out, 3, 0, BLOCK=16)
    return out


def test_compiler_finding_planmemory_gives_the_accumulator_the_else_branch_cast_buffer():
    # bishengir-compile 1.2.0 places the loop-carried accumulator the else branch yields and that
    # branch's bf16->f32 cast result at the same UB offset: a second else iteration in a row casts
    # over the accumulator (docs/ascend.md, "Running the compiled kernel on the CPU").  The source
    # sums the 3 rows; the compiled kernel returns 2 * row 2.
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    want = x.float().sum(0).to(torch.bfloat16)
    sim, = triton_dist.launch(_acc_rows, world_size=1, backend="sim").values
    torch.testing.assert_close(sim, want, rtol=1.6e-2, atol=1.6e-2)
    compiled, = triton_dist.launch(_acc_rows, world_size=1, backend="hivm").values
    assert torch.equal(compiled, (2 * x[2].float()).to(torch.bfloat16))
    assert (compiled.float() - want.float()).abs().max() > 1.0


def test_the_backend_fixture_takes_hivm_only_where_asked_for():
    import triton_dist_pytest as plugin
    assert plugin._by_default("sim") is True
    assert plugin._by_default("hivm") is False


COMPARED = '''
import torch, triton, triton.language as tl, triton_dist
from test_hivm_backend import masked_add, _acc_rows

def _add():
    x, y = torch.arange(100.0), torch.ones(100)
    out = torch.zeros(100)
    masked_add[(2,)](x, y, out, 100, BLOCK=64)
    return out

def test_agrees(backend):
    triton_dist.launch(_add, world_size=1, backend=backend)

def test_compiler_finding_disagrees(backend):
    triton_dist.launch(_acc_rows, world_size=1, backend=backend)
'''


def test_compare_backends_sim_hivm_passes_agreement_and_fails_the_finding(tmp_path):
    import os
    import subprocess
    import sys
    (tmp_path / "test_compared.py").write_text(COMPARED)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--compare-backends",
                           "sim,hivm", str(tmp_path / "test_compared.py")], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=600)
    out = proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in out, out[-3000:]
    assert "test_compiler_finding_disagrees" in out and "disagree" in out, out[-3000:]


@triton.jit
def tiled_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _matmul():
    from triton_dist.backend_ascend.cpu_run import backend as hivm
    errs = []
    for dt in (torch.float32, torch.float16):
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(50, 70, generator=g).to(dt), torch.randn(70, 40, generator=g).to(dt)
        c = torch.full((50, 40), float("nan"), dtype=dt)
        tiled_matmul[(triton.cdiv(50, 32), triton.cdiv(40, 32))](a, b, c, 50, 40, 70, BM=32, BN=32, BK=32)
        errs.append((c.double() - a.double() @ b.double()).abs().max().item())
    return errs, hivm.STAGES["tiled_matmul"]


def test_a_tiled_dot_runs_the_final_module_with_nz_fractal_buffers():
    # the cube path after PlanMemory: nd2nz into L1, mma_tile into L0C, fixpipe nz2nd out, masks as set_l1 fills
    (errs, stage), = triton_dist.launch(_matmul, world_size=1, backend="hivm").values
    assert stage == "convert-hivm-to-std"
    assert errs[0] < 1e-4 and errs[1] < 2e-2, errs


@triton.jit
def dot_relu(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    c = tl.dot(tl.load(a_ptr + rm[:, None] * K + rk[None, :]), tl.load(b_ptr + rk[:, None] * N + rn[None, :]))
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.maximum(c * 2.0, 0.0))


def _mix():
    from triton_dist.backend_ascend.cpu_run import backend as hivm
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 16, generator=g), torch.randn(16, 16, generator=g)
    c = torch.full((16, 16), float("nan"))
    dot_relu[(3,)](a, b, c, M=16, N=16, K=16)
    return (c.double() - torch.relu(2 * (a.double() @ b.double()))).abs().max().item(), hivm.STAGES["dot_relu"]


def test_a_mix_kernel_runs_its_cube_and_vector_halves_with_their_flags():
    # hivm-split-mix-kernel: _mix_aic (dot, fixpipe to the workspace, sync_block_set) and _mix_aiv on both
    # vector cores (sync_block_wait, the epilogue with bit-packed bool masks for the NaN handling of maximum)
    (err, stage), = triton_dist.launch(_mix, world_size=1, backend="hivm").values
    assert stage == "convert-hivm-to-std"
    assert err < 1e-5


def _descriptor(base, offset, size, stride=1):
    import ctypes
    d = (ctypes.c_int64 * 5)(base, base, offset, size, stride)
    return d, ctypes.addressof(d)


def test_ub_checks_fault_beyond_the_core_and_on_a_misaligned_vector_operand_only():
    # the detectors of memory.py on descriptors as the compiled module passes them (both sides of each)
    import numpy as np
    from triton_dist.backend_ascend.cpu_run import memory as M
    ub = np.zeros(192 * 1024, dtype=np.uint8)
    M.set_state(M.BlockState(spaces={"ub": ub}, sizes={"ub": len(ub), "ub_align": 32}, kernel="k"))
    try:
        base = ub.ctypes.data
        keep, inside = _descriptor(base, 8, 64)                 # fp32 elements 8..71: byte 32, aligned
        M.check_ub(M.view(inside, 1, 4), "vadd operand")
        keep2, past = _descriptor(base, 49152 - 8, 64)          # runs 224 bytes past 192 KiB
        with pytest.raises(M.DeviceFault, match="beyond the 192 KiB"):
            M.check_ub(M.view(past, 1, 4), "vadd operand")
        keep3, odd = _descriptor(base, 3, 64)                   # starts at byte 12
        with pytest.raises(M.DeviceFault, match="unaligned UB VEC access"):
            M.check_ub(M.view(odd, 1, 4), "vadd operand")
        M.check_ub(M.view(odd, 1, 4), "a DMA destination", vector=False)   # DMA handles unaligned heads
    finally:
        M.set_state(None)


def _library_subset():
    r, w = triton_dist.rank(), triton_dist.world_size()
    x = torch.randn(1000, generator=torch.Generator().manual_seed(r))
    y = torch.randn(1000, generator=torch.Generator().manual_seed(100 + r))
    out = torch.zeros(1000)
    masked_add[(triton.cdiv(1000, 64),)](x, y, out, 1000, BLOCK=64)
    src = triton_dist.symm_tensor((16,), torch.float32)
    dst = triton_dist.symm_tensor((16,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    src.copy_(torch.arange(16.0) + 10 * r)
    triton_dist.barrier()
    ring_kernel[(1,)](src, dst, sig, N=16)
    prev = (r - 1) % w
    assert torch.equal(out, x + y)
    assert torch.equal(dst, torch.arange(16.0) + 10 * prev + prev * 1000 + w)
    triton_dist.barrier()
    return out, dst.clone()


def test_the_ci_subset_on_each_backend(backend):
    # the default suite runs it on the simulator; `pytest --backend sim,hivm` on both,
    # `--compare-backends sim,hivm` compares what the two return
    values = triton_dist.launch(_library_subset, world_size=2, backend=backend, timeout=120).values
    assert len(values) == 2


consts = types.ModuleType("hivm_test_consts")     # a module of constants, as gemm.py's flags are
consts.SCALE = tl.constexpr(2.0)
sys.modules[consts.__name__] = consts


@triton.jit
def _times_scale(x):
    return x * consts.SCALE    # a module attribute read by a helper: not in Triton's cache_key


@triton.jit
def scale_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _times_scale(tl.load(x_ptr + offs)))


def _scaled():
    x = torch.arange(16, dtype=torch.float32)
    out = torch.zeros(16)
    scale_kernel[(1,)](x, out, BLOCK=16)
    return out


def test_a_changed_constant_of_a_helper_is_compiled_again(monkeypatch):
    """The compiled-kernel cache is keyed by the kernel's code as it is now (source_key), as
    npu-compile's verdicts are: with consts.SCALE rebound the same kernel must compute x * 3 (torch),
    not run the module compiled for x * 2 (it did: Triton's cache_key misses a module attribute a
    helper reads)."""
    x = torch.arange(16, dtype=torch.float32)
    (out,) = triton_dist.launch(_scaled, world_size=1, backend="hivm").values
    assert torch.equal(out, x * 2)
    monkeypatch.setattr(consts, "SCALE", tl.constexpr(3.0))
    (out,) = triton_dist.launch(_scaled, world_size=1, backend="hivm").values
    assert torch.equal(out, x * 3)
