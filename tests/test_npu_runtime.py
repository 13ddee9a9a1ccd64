"""The NPU runtime path (backend="npu").

Why one long file: the NPU conformance tests and the CPU-side checks of the same runtime
(configuration, capability detection, refusal messages) share their fixtures.

Tests marked `npu` run the same conformance checks as the simulator, on real NPUs
(spawned ranks, hccl, the shmem heap, kernels compiled by triton-ascend with the
distributed lowering); they skip, naming what is missing, on any other machine.  The
unmarked tests check what a CPU machine can: nothing NPU-related is imported by
triton_dist, the backend refuses clearly, and its configuration is read as documented.
Oracles: docs/semantics.md §4-§5 and the arithmetic of each test.
"""
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.backend_ascend import runtime as R
from triton_dist.errors import TritonDistError
from triton_dist.language.extra import libshmem_device as shm

MISSING = R.missing()         # on an NPU host with everything else, it names a missing wrapper bitcode too
NPU_MISSING = MISSING
needs_npu = [pytest.mark.npu, pytest.mark.skipif(bool(NPU_MISSING), reason="needs " + ", ".join(NPU_MISSING))]
NPU_WORLD = int(os.environ.get("TRITON_DIST_NPU_TEST_WORLD", "2"))


def _npu(fn):
    for mark in reversed(needs_npu):
        fn = mark(fn)
    return fn


# --- on any machine --------------------------------------------------------------------------------
def test_importing_triton_dist_touches_nothing_npu_related():
    code = ("import sys, triton_dist, triton_dist.language, triton_dist.backend_ascend, "
            "triton_dist.backend_ascend.runtime, triton_dist.backend_ascend.npu_compile, triton_dist.cli\n"
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
    # the numbers shmem's OpEngineType uses (docs/semantics.md §4)
    from triton_dist import symbols as S
    assert S.OP_ENGINE_TYPES == {"MTE": 0x1, "SDMA": 0x2, "ROCE": 0x4, "UDMA": 0x8}


def test_heap_configuration():
    assert R.heap_bytes_from_env("") == 1 << 30
    assert R.heap_bytes_from_env("0x1000") == 4096
    with pytest.raises(TritonDistError, match="positive number of bytes"):
        R.heap_bytes_from_env("lots")


# --- the shmem bootstrap port: agreed per job, never a fixed one -----------------------------------------
def test_bootstrap_address_from_the_environment(monkeypatch):
    monkeypatch.setenv(R.IP_PORT_ENV, "tcp://127.0.0.1:9000")
    assert R.shmem_ip_port(1, lambda v: pytest.fail("no agreement needed")) == "tcp://127.0.0.1:9000"


def _agree_bootstrap(held_port):
    import socket

    import torch.distributed as dist
    addr = R.shmem_ip_port(dist.get_rank(), R.broadcast_from_rank0())
    port = int(addr.rsplit(":", 1)[1])
    free = True
    if dist.get_rank() == 0:                        # shmem's bootstrap will listen there
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                free = False
    return addr, port != held_port, free


def test_two_jobs_on_one_host_get_different_bootstrap_ports(monkeypatch):
    """Another job's bootstrap holds a port; a new job's ranks agree on one port, a free one."""
    import socket

    import triton_dist
    monkeypatch.delenv(R.IP_PORT_ENV, raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with socket.socket() as other_job:
        other_job.bind(("", 0))
        other_job.listen()
        held = other_job.getsockname()[1]
        values = triton_dist.launch(_agree_bootstrap, held, world_size=3).values
    addrs = {v[0] for v in values}
    assert len(addrs) == 1 and addrs.pop().startswith("tcp://127.0.0.1:")
    assert all(v[1] for v in values) and values[0][2]


def test_the_bootstrap_port_is_not_fixed():
    assert not hasattr(R, "DEFAULT_SHMEM_PORT")
    assert "8666" not in open(R.__file__).read()


# --- the aclshmem wrapper bitcode ---------------------------------------------------------------------
# AscendNPU-IR bishengir/lib/Template/CMakeLists.txt (compile_shmem_to_bc): Shmem.cpp compiles to
# Shmem.aic.c220.bc, Shmem.aiv.c220.bc, Shmem.mix.aic.c220.bc, Shmem.mix.aiv.c220.bc (Ascend910B)
# and the .c310 ones (Ascend910D), only with SHMEM_BUILD_TEMPLATE (build.sh --build-shmem-template).
AICORE_BITCODE = {(False, "VECTOR"): "Shmem.aiv.c220.bc", (False, "CUBE_AND_VECTOR"): "Shmem.aiv.c220.bc",
                  (True, "VECTOR"): "Shmem.mix.aiv.c220.bc", (True, "CUBE_AND_VECTOR"): "Shmem.mix.aic.c220.bc"}


def test_bitcode_variant_follows_the_kernel_core_type(monkeypatch, tmp_path):
    from triton_dist.backend_ascend import npu_compile
    monkeypatch.delenv(npu_compile.ARCH_ENV, raising=False)
    for name in set(AICORE_BITCODE.values()):
        (tmp_path / name).write_bytes(b"BC")
    select = npu_compile.bitcode_selector(str(tmp_path))
    for (has_dot, core), name in AICORE_BITCODE.items():
        assert select(core, has_dot) == str(tmp_path / name)
    monkeypatch.setenv(npu_compile.ARCH_ENV, "c310")
    assert npu_compile.bitcode_selector(str(tmp_path), check=False)("VECTOR", False) == str(tmp_path / "Shmem.aiv.c310.bc")
    monkeypatch.setenv(npu_compile.ARCH_ENV, "c999")
    with pytest.raises(TritonDistError, match="TRITON_DIST_ACLSHMEM_ARCH must be one of c220"):
        npu_compile.bitcode_selector(str(tmp_path))


def test_bitcode_configuration_errors_say_what_to_do(monkeypatch, tmp_path):
    from triton_dist.backend_ascend import npu_compile
    monkeypatch.delenv(npu_compile.ARCH_ENV, raising=False)
    monkeypatch.delenv(npu_compile.BITCODE_ENV, raising=False)
    monkeypatch.setattr(npu_compile, "template_library_dirs", lambda: [])
    with pytest.raises(TritonDistError) as e:
        npu_compile.bitcode_for_kernels()
    msg = str(e.value)
    for needed in ("TRITON_DIST_ACLSHMEM_BITCODE is not set", "bishengir/lib/Template/lib/Shmem/Shmem.cpp",
                   "--build-shmem-template", "scripts/aclshmem_bitcode.sh", "hicann/shmem has no _mlir_ciface_"):
        assert needed in msg, needed
    monkeypatch.setenv(npu_compile.BITCODE_ENV, str(tmp_path / "nope"))
    with pytest.raises(TritonDistError, match="no such file or directory"):
        npu_compile.bitcode_for_kernels()
    (tmp_path / "Shmem.aiv.c220.bc").write_bytes(b"BC")
    monkeypatch.setenv(npu_compile.BITCODE_ENV, str(tmp_path))
    select = npu_compile.bitcode_for_kernels()
    assert select("VECTOR", False) == str(tmp_path / "Shmem.aiv.c220.bc")
    with pytest.raises(TritonDistError, match=r"has no Shmem\.mix\.aic\.c220\.bc .*CUBE_AND_VECTOR op of a mix kernel"):
        select("CUBE_AND_VECTOR", True)
    one = tmp_path / "aclshmem.bc"
    one.write_bytes(b"BC")
    monkeypatch.setenv(npu_compile.BITCODE_ENV, str(one))
    assert npu_compile.bitcode_for_kernels() == str(one)


def test_missing_wrappers_are_reported_once_everything_else_is_there(monkeypatch, tmp_path):
    from triton_dist.backend_ascend import npu_compile
    monkeypatch.setattr(R, "is_ascend", lambda: True)
    monkeypatch.setattr(R.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(npu_compile, "triton_ascend_problems", lambda: [])
    monkeypatch.delenv(npu_compile.BITCODE_ENV, raising=False)
    monkeypatch.setattr(npu_compile, "template_library_dirs", lambda: [])
    (need,) = R.missing()
    assert "TRITON_DIST_ACLSHMEM_BITCODE is not set" in need and "scripts/aclshmem_bitcode.sh" in need
    (tmp_path / "Shmem.aiv.c220.bc").write_bytes(b"BC")
    monkeypatch.setenv(npu_compile.BITCODE_ENV, str(tmp_path))
    assert R.missing() == []


def test_a_template_library_with_the_wrappers_needs_no_bitcode(monkeypatch, tmp_path):
    """bishengir links meta_op.<variant>.<arch>.bc per core type itself (link_all_to_meta_op)."""
    from triton_dist.backend_ascend import npu_compile
    monkeypatch.delenv(npu_compile.BITCODE_ENV, raising=False)
    monkeypatch.delenv(npu_compile.ARCH_ENV, raising=False)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "meta_op.aiv.c220.bc").write_bytes(b"BC\xc0\xde..._mlir_ciface_vadd_half")
    monkeypatch.setattr(npu_compile, "template_library_dirs", lambda: [str(lib)])
    with pytest.raises(TritonDistError, match="has no aclshmem wrappers"):
        npu_compile.bitcode_for_kernels()
    (lib / "meta_op.aiv.c220.bc").write_bytes(b"BC\xc0\xde..._mlir_ciface_aclshmem_my_pe...")
    assert npu_compile.bitcode_for_kernels() is None


def test_the_published_ascendnpu_ir_has_no_aclshmem_wrappers():
    """What docs/ascend.md ("The aclshmem wrapper bitcode") says of the ascendnpu-ir 1.2.0 wheel, checked on its files: its
    template bitcode stores _mlir_ciface_* names verbatim, none of them aclshmem ones."""
    from triton_dist.backend_ascend import npu_compile
    dirs = [d for d in npu_compile.template_library_dirs() if "ascendnpuir" in d]
    if not dirs:
        pytest.skip("ascendnpu-ir is not installed (the test extra installs it on cp311 x86_64 Linux)")
    files = [f for f in os.listdir(dirs[0]) if f.startswith("meta_op.") and f.endswith(".bc")]
    assert "meta_op.aiv.c220.bc" in files and "meta_op.mix.aic.c220.bc" in files
    assert not any(npu_compile.has_wrappers(os.path.join(dirs[0], f)) for f in files)
    with open(os.path.join(dirs[0], "meta_op.aiv.c220.bc"), "rb") as f:
        assert b"_mlir_ciface_" in f.read()


# --- what triton-ascend must be able to do (issue: 3.2.0 cannot run any distributed kernel) ---------------
# Facts read from the sources: the PyPI wheel triton-ascend 3.2.0 declares `def program_id(axis,
# _builder=None)` (triton/language/core.py) and has no triton/language/extra/cann; triton-ascend
# main (github Ascend/triton-ascend eeb030e7) has third_party/ascend/language/cann/extension/
# __init__.py exporting custom / register_custom_op, and its backend/driver.py (line 600) refuses
# pointers with `attributes.location.type != ACL_MEM_LOCATION_TYPE_DEVICE`.
MAIN_DRIVER_CHECK = ("      if (attributes.location.type != ACL_MEM_LOCATION_TYPE_DEVICE && "
                     "attributes.location.type != 4) {\n")


def _fake_triton(tmp_path, *, extension, driver_check):
    root = tmp_path / "triton"
    (root / "backends" / "ascend").mkdir(parents=True)
    (root / "backends" / "ascend" / "driver.py").write_text(
        'SRC = r"""\n' + (MAIN_DRIVER_CHECK if driver_check else "") + '"""\n')
    if extension:
        ext = root / "language" / "extra" / "cann" / "extension"
        ext.mkdir(parents=True)
        (ext / "__init__.py").write_text("from .custom_op import (\n    custom,\n    custom_semantic,\n"
                                         "    register_custom_op,\n)\n")
    return str(root)


def test_triton_ascend_capabilities_are_detected(monkeypatch, tmp_path):
    from triton_dist.backend_ascend import npu_compile
    # like the 3.2.0 wheel: no custom-op support
    monkeypatch.setattr(npu_compile, "_triton_dir", lambda: _fake_triton(tmp_path / "a", extension=False,
                                                                          driver_check=False))
    problems = npu_compile.triton_ascend_problems()
    assert len(problems) == 1 and "hivm.hir.custom support" in problems[0] and "main line" in problems[0]
    # like its main line without Triton-distributed's patch: the driver refuses shmem-heap pointers
    monkeypatch.setattr(npu_compile, "_triton_dir", lambda: _fake_triton(tmp_path / "b", extension=True,
                                                                          driver_check=True))
    problems = npu_compile.triton_ascend_problems()
    assert len(problems) == 1 and "ACL_MEM_LOCATION_TYPE_DEVICE" in problems[0] and "triton-ascend.patch" in problems[0]
    monkeypatch.setattr(npu_compile, "_triton_dir", lambda: _fake_triton(tmp_path / "c", extension=True,
                                                                          driver_check=False))
    assert npu_compile.triton_ascend_problems() == []


def test_a_frontend_that_passes_builder_is_refused(monkeypatch, tmp_path):
    import triton.language as tl

    from triton_dist.backend_ascend import npu_compile

    def program_id(axis, _builder=None):          # the 3.2.0 signature
        pass

    monkeypatch.setattr(npu_compile, "_triton_dir", lambda: _fake_triton(tmp_path, extension=True,
                                                                          driver_check=False))
    monkeypatch.setattr(tl, "program_id", program_id)
    (problem,) = npu_compile.triton_ascend_problems()
    assert "passes `_builder=`" in problem and "rank() got an unexpected keyword argument '_builder'" in problem


def test_stock_triton_is_not_triton_ascend():
    from triton_dist.backend_ascend import npu_compile
    problems = npu_compile.triton_ascend_problems()
    assert len(problems) == 1 and problems[0].startswith("triton-ascend (triton.backends.ascend is not installed")


class _Backend:
    def __init__(self, compiler):
        self.compiler = compiler


def _fake_ascend_backends(monkeypatch, tmp_path, importable_too):
    """triton.backends as the 3.2.0 wheel builds it: the compiler module loaded under the bare
    name 'ascend' (a class distinct from triton.backends.ascend.compiler.AscendBackend)."""
    import sys
    import types

    from triton_dist.backend_ascend import npu_compile
    calls = []

    def make_class():
        class AscendBackend:
            def add_stages(self, stages, options):
                stages["ttir"] = lambda src, md: ("ttir", src)
                stages["ttadapter"] = lambda src, md: calls.append(src) or "linalg"
        return AscendBackend

    discovered = make_class()
    fake = types.ModuleType("triton.backends")
    fake.backends = {"ascend": _Backend(discovered)}
    monkeypatch.setitem(sys.modules, "triton.backends", fake)
    if importable_too:
        importable = make_class()
        mod = types.ModuleType("triton.backends.ascend.compiler")
        mod.AscendBackend = importable
        monkeypatch.setitem(sys.modules, "triton.backends.ascend", types.ModuleType("triton.backends.ascend"))
        monkeypatch.setitem(sys.modules, "triton.backends.ascend.compiler", mod)
    monkeypatch.setattr(npu_compile, "triton_ascend_problems", lambda: [])
    return discovered, calls


def test_the_stage_hook_is_installed_on_the_class_compiles_use(monkeypatch, tmp_path):
    from triton_dist.backend_ascend import npu_compile
    discovered, calls = _fake_ascend_backends(monkeypatch, tmp_path, importable_too=True)
    lowered = []
    monkeypatch.setattr(npu_compile, "lower_module", lambda src: lowered.append(src) or f"lowered({src})")
    npu_compile.install()
    stages = {}
    discovered().add_stages(stages, options=None)
    assert stages["ttadapter"]("ttir-module", {}) == "linalg"
    assert lowered == ["ttir-module"] and calls == ["lowered(ttir-module)"]


def test_a_failing_ttadapter_stage_says_what_triton_ascend_lacks(monkeypatch, tmp_path):
    from triton_dist.backend_ascend import npu_compile
    discovered, _ = _fake_ascend_backends(monkeypatch, tmp_path, importable_too=False)
    monkeypatch.setattr(npu_compile, "lower_module", lambda src: "lowered")
    npu_compile.install()
    stages = {}
    discovered().add_stages(stages, options=None)

    def failing(src, md):
        raise RuntimeError("PassManager::run failed")
    stages["ttadapter"] = npu_compile._ttadapter_with_lowering(failing)
    with pytest.raises(TritonDistError) as e:
        stages["ttadapter"]("module", {})
    msg = str(e.value)
    assert "CustomOpConverter takes a custom op's result types from `outs` only" in msg
    assert "pointer analysis" in msg and "PassManager::run failed" in msg and "docs/ascend.md" in msg


def test_the_npu_step_links_the_bitcode(tmp_path):
    """What the ttadapter pre-step emits on the NPU: the CPU lowering plus each op's bitcode."""
    from triton_dist.backend_ascend.frontend import build_ttir
    from triton_dist.backend_ascend.hivm import convert_text, module_facts
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
    shm.fence()                                     # the block store (a DMA) before the signal
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
