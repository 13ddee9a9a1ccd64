"""The NPU runtime path (backend="npu").

Tests marked `npu` run the same conformance checks as the simulator, on real NPUs
(spawned ranks, hccl, the shmem heap, kernels compiled by triton-ascend with the
distributed lowering); they skip, naming what is missing, on any other machine.  The
unmarked tests check what a CPU machine can: nothing NPU-related is imported by
triton_dist, the backend refuses clearly, and its configuration is read as documented.
Oracles: SEMANTICS.md §4-§5 and the arithmetic of each test.
"""
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from backend_ascend import runtime as R
from triton_dist.errors import TritonDistError
from triton_dist.language.extra import libshmem_device as shm

MISSING = R.missing()
NPU_MISSING = MISSING + ([] if os.environ.get("TRITON_DIST_ACLSHMEM_BITCODE") else
                         ["TRITON_DIST_ACLSHMEM_BITCODE (the aclshmem device bitcode)"])
needs_npu = [pytest.mark.npu, pytest.mark.skipif(bool(NPU_MISSING), reason="needs " + ", ".join(NPU_MISSING))]
NPU_WORLD = int(os.environ.get("TRITON_DIST_NPU_TEST_WORLD", "2"))


def _npu(fn):
    for mark in reversed(needs_npu):
        fn = mark(fn)
    return fn


# --- on any machine --------------------------------------------------------------------------------
def test_importing_triton_dist_touches_nothing_npu_related():
    code = ("import sys, triton_dist, triton_dist.language, backend_ascend, backend_ascend.runtime, "
            "backend_ascend.npu_compile, triton_dist.cli\n"
            "from triton_dist.language.extra import libshmem_device\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch_npu', 'shmem', 'acl') "
            "or m.startswith('triton.backends.ascend')]\n"
            "print(','.join(bad))")
    for backend in ("sim", "npu", "auto"):
        env = dict(os.environ, TRITON_DIST_BACKEND=backend)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "", f"TRITON_DIST_BACKEND={backend} imported {out.stdout.strip()}"


@pytest.mark.skipif(not MISSING, reason="this machine has everything backend 'npu' needs")
def test_npu_backend_refuses_with_what_is_missing():
    with pytest.raises(TritonDistError) as e:
        R.NpuBackend()
    msg = str(e.value)
    assert "backend 'npu' needs" in msg and "TRITON_DIST_BACKEND=sim" in msg
    for item in MISSING:
        assert item in msg


def test_engine_selection():
    assert R.engine_from_env("") == "MTE"                   # MTE is the default
    for name in ("MTE", "SDMA", "ROCE", "UDMA", "sdma"):
        assert R.engine_from_env(name) == name.upper()
    with pytest.raises(TritonDistError, match=r"TRITON_DIST_OP_ENGINE must be one of MTE, SDMA, ROCE, UDMA"):
        R.engine_from_env("NVLINK")
    # the numbers shmem's OpEngineType uses (SEMANTICS §4)
    from triton_dist import symbols as S
    assert S.OP_ENGINE_TYPES == {"MTE": 0x1, "SDMA": 0x2, "ROCE": 0x4, "UDMA": 0x8}


def test_heap_and_bootstrap_configuration(monkeypatch):
    assert R.heap_bytes_from_env("") == 1 << 30
    assert R.heap_bytes_from_env("0x1000") == 4096
    with pytest.raises(TritonDistError, match="positive number of bytes"):
        R.heap_bytes_from_env("lots")
    monkeypatch.delenv(R.IP_PORT_ENV, raising=False)
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.7")
    assert R.ip_port_from_env() == "tcp://10.0.0.7:8666"
    monkeypatch.setenv(R.IP_PORT_ENV, "tcp://127.0.0.1:9000")
    assert R.ip_port_from_env() == "tcp://127.0.0.1:9000"


def test_bitcode_path_is_configured(monkeypatch, tmp_path):
    from backend_ascend import npu_compile
    monkeypatch.delenv(npu_compile.BITCODE_ENV, raising=False)
    with pytest.raises(TritonDistError, match=r"TRITON_DIST_ACLSHMEM_BITCODE is not set.*hicann/shmem"):
        npu_compile.bitcode_path()
    monkeypatch.setenv(npu_compile.BITCODE_ENV, str(tmp_path / "nope.bc"))
    with pytest.raises(TritonDistError, match="no such file"):
        npu_compile.bitcode_path()
    bc = tmp_path / "aclshmem_device.bc"
    bc.write_bytes(b"BC")
    monkeypatch.setenv(npu_compile.BITCODE_ENV, str(bc))
    assert npu_compile.bitcode_path() == str(bc)


def test_the_npu_step_links_the_bitcode(tmp_path):
    """What the ttadapter pre-step emits on the NPU: the CPU lowering plus each op's bitcode."""
    from backend_ascend.frontend import build_ttir
    from backend_ascend.hivm import convert_text, module_facts
    bc = str(tmp_path / "aclshmem_device.bc")
    module, _ = build_ttir(ring_kernel, {"buf": "*i32", "out": "*i32", "sig": "*i32"}, {"N": 16})
    has_dot, count = module_facts(module)
    text, n = convert_text(str(module), has_dot=has_dot, bitcode=bc)      # with locations, as on the NPU
    assert n == count > 0
    ops = [line for line in text.splitlines() if "hivm.hir.custom" in line]
    assert len(ops) == count and all(f'bitcode = "{bc}"' in line for line in ops)
    assert "triton_dist.dist" not in text


def test_interpreted_kernels_are_refused_on_the_npu_backend():
    if MISSING:
        pytest.skip("needs " + ", ".join(MISSING))
    with pytest.raises(TritonDistError, match="compiled by triton-ascend"):
        R.NpuBackend().device_call("aclshmem_my_pe")


# --- on NPUs: the simulator's conformance checks -------------------------------------------------------
@triton.jit
def ring_kernel(buf, out, sig, N: tl.constexpr):
    """Every rank puts its block into its right neighbour's `out` and signals it."""
    me = dl.rank()
    n = dl.num_ranks()
    right = (me + 1) % n
    offs = tl.arange(0, N)
    tl.store(dl.symm_at(out, right) + offs, tl.load(buf + offs))
    dl.notify(sig, right, signal=1, sig_op="set")
    tok = dl.wait(sig, 1, "gpu", "acquire", waitValue=1)
    src = dl.consume_token(out, tok)
    tl.store(buf + N + offs, tl.load(src + offs))


@triton.jit
def put_signal_kernel(buf, out, sig, N: tl.constexpr):
    me = shm.my_pe()
    n = shm.n_pes()
    right = (me + 1) % n
    shm.putmem_signal(out, buf, tl.cast(N * 4, tl.uint32), sig, 1, shm.ACLSHMEM_SIGNAL_ADD, right)
    shm.signal_wait_until(sig, shm.ACLSHMEM_CMP_EQ, 1)
    shm.barrier_all()


def _host_api():
    import triton_dist
    r, w = triton_dist.rank(), triton_dist.world_size()
    a = triton_dist.symm_tensor((4, 16), torch.int32)
    b = triton_dist.symm_tensor((8,), torch.float32)
    zero = bool((a == 0).all()) and bool((b == 0).all())
    triton_dist.barrier()
    triton_dist.free(b)
    triton_dist.free(a)
    return r, w, str(triton_dist.device()), zero


def _ring(N):
    import triton_dist
    r = triton_dist.rank()
    buf = triton_dist.symm_tensor((2 * N,), torch.int32)
    buf[:N] = torch.arange(N, dtype=torch.int32, device=buf.device) + 1000 * r
    out = triton_dist.symm_tensor((N,), torch.int32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    triton_dist.barrier()
    ring_kernel[(1,)](buf, out, sig, N=N)
    triton_dist.barrier()
    return buf[N:].cpu().tolist()


def _put_signal(N):
    import triton_dist
    r = triton_dist.rank()
    buf = triton_dist.symm_tensor((N,), torch.float32)
    buf += r + 0.5
    out = triton_dist.symm_tensor((N,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    triton_dist.barrier()
    put_signal_kernel[(1,)](buf, out, sig, N=N)
    triton_dist.barrier()
    return out.cpu().tolist(), int(sig[0].item())


@_npu
def test_npu_host_api():
    values = R.launch(_host_api, world_size=NPU_WORLD)
    assert [v[:2] for v in values] == [(r, NPU_WORLD) for r in range(NPU_WORLD)]
    assert [v[2] for v in values] == [f"npu:{r}" for r in range(NPU_WORLD)]
    assert all(v[3] for v in values)


@_npu
def test_npu_ring_with_dl_ops():
    N = 16
    values = R.launch(_ring, N, world_size=NPU_WORLD)
    for r, got in enumerate(values):
        left = (r - 1) % NPU_WORLD
        assert got == [1000 * left + i for i in range(N)]


@_npu
def test_npu_putmem_signal_and_barrier_all():
    N = 32
    values = R.launch(_put_signal, N, world_size=NPU_WORLD)
    for r, (out, sig) in enumerate(values):
        left = (r - 1) % NPU_WORLD
        assert out == [left + 0.5] * N and sig == 1
