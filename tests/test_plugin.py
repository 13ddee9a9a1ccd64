"""The pytest plugin, checked with pytest's own pytester."""
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NO_GPU = pytest.mark.skipif(shutil.which("nvidia-smi") is not None,
                            reason="checks the skip reasons of a machine without an NVIDIA GPU")


@pytest.fixture(autouse=True)
def _repo_on_path(monkeypatch):
    """pytester runs pytest in a temporary directory: put the repository on the path, as its
    conftest.py does for the real suite, so backend_cuda imports there too."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))

KERNEL_TEST = '''
import torch, triton, triton.language as tl
import triton_dist, triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm

@triton.jit
def bump(buf, out):
    p = dl.symm_at(buf, 0)
    v = tl.load(p + tl.arange(0, 1))
    tl.store(p + tl.arange(0, 1), v + 1)          # racy read-modify-write
    shm.barrier_all()
    tl.store(out + tl.arange(0, 1), tl.load(p + tl.arange(0, 1)))

def body():
    buf = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    bump[(1,)](buf, out)
    return out.item()

def test_racy_counter():
    assert triton_dist.launch(body, world_size=3).values == [3, 3, 3]

def test_on_backend(backend):
    assert backend in ("sim", "npu", "cuda")
    assert triton_dist.launch(lambda: triton_dist.rank(), world_size=2).values == [0, 1]

@__import__("pytest").mark.backend("npu")
def test_needs_npu():
    assert False, "must not run without an NPU"
'''


def test_backend_parametrization_and_npu_skip(pytester):
    pytester.makepyfile(test_k=KERNEL_TEST)
    r = pytester.runpytest_subprocess("--backend", "sim,npu", "-k", "backend or npu", "-rs")
    r.assert_outcomes(passed=1, skipped=2)
    r.stdout.fnmatch_lines(["*backend 'npu' needs an Ascend NPU (npu-smi is not on PATH)*"])
    assert "test_on_backend[sim] PASSED" in "\n".join(pytester.runpytest_subprocess(
        "--backend", "sim", "-k", "backend", "-v").outlines)


@NO_GPU
def test_cuda_variant_is_skipped_without_a_gpu(pytester):
    pytester.makepyfile(test_k=KERNEL_TEST)
    r = pytester.runpytest_subprocess("--backend", "sim,cuda", "-k", "on_backend", "-rs", "-v")
    r.assert_outcomes(passed=1, skipped=1)
    r.stdout.fnmatch_lines(["*test_on_backend?sim? PASSED*", "*test_on_backend?cuda? SKIPPED*"])
    r.stdout.fnmatch_lines(["*backend 'cuda' needs an NVIDIA GPU (nvidia-smi is not on PATH)*"])


def test_need_ranks_skips_only_on_cuda(monkeypatch):
    from triton_dist.backend_cuda import runtime
    from triton_dist.pytest_plugin import need_ranks
    monkeypatch.setattr(runtime, "device_count", lambda: 2)
    need_ranks("sim", 8)                    # the simulator runs any number of ranks
    need_ranks("cuda", 2)
    monkeypatch.delenv("TRITON_DIST_CUDA_SHARE_GPUS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="3 ranks need 3 GPUs .* this machine has 2"):
        need_ranks("cuda", 3)
    monkeypatch.setenv("TRITON_DIST_CUDA_SHARE_GPUS", "1")    # ranks may share GPUs: no skip
    need_ranks("cuda", 3)


SESSION_TEST = '''
import triton_dist

def test_plain():
    pass

def test_on_backend(backend):
    pass
'''


@NO_GPU
def test_cuda_session_runs_the_simulator_variants_and_skips_simulator_only_tests(pytester, monkeypatch):
    # issue 23: TRITON_DIST_BACKEND=cuda names launch()'s default only; the kernel mode is per
    # launch, so the sim variant of a `backend` test runs (it was skipped: "this session compiles
    # kernels for 'cuda'"), while a test that launches on the default backend and asserts the
    # simulator is skipped
    pytester.makepyfile(test_s=SESSION_TEST)
    monkeypatch.setenv("TRITON_DIST_BACKEND", "cuda")
    r = pytester.runpytest_subprocess("--backend", "sim,cuda", "-rs", "-v")
    r.assert_outcomes(passed=1, skipped=2)
    r.stdout.fnmatch_lines_random([
        "*test_on_backend?sim? PASSED*",
        "*simulator-only test: launch() in this session defaults to backend 'cuda' (TRITON_DIST_BACKEND=cuda)*",
        "*backend 'cuda' needs an NVIDIA GPU*"])


def test_bad_backend_is_a_usage_error(pytester):
    pytester.makepyfile(test_k=KERNEL_TEST)
    r = pytester.runpytest_subprocess("--backend", "gpu")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*unknown backend(s) gpu*"])


def test_seeds_find_the_race_and_the_replay_line_reproduces_it(pytester):
    pytester.makepyfile(test_k=KERNEL_TEST)
    r = pytester.runpytest_subprocess("-k", "racy", "--sim-schedule", "random", "--sim-seeds", "12")
    r.assert_outcomes(failed=1)
    lines = [ln for ln in r.outlines if ln.startswith("pytest ") and "--sim-seed " in ln]
    assert lines, r.stdout.str()
    replay = lines[0].split()
    assert replay[1] == "test_k.py::test_racy_counter" and replay[2:4] == ["--sim-schedule", "random"]
    seed = int(replay[replay.index("--sim-seed") + 1])
    again = pytester.runpytest_subprocess(*replay[1:])
    again.assert_outcomes(failed=1)
    # the replayed failure is the same failure: same values
    first_vals = [ln for ln in r.outlines if "assert [" in ln][0]
    assert first_vals in again.outlines
    assert seed >= 0


def test_seeds_need_a_deterministic_schedule(pytester):
    pytester.makepyfile(test_k=KERNEL_TEST)
    r = pytester.runpytest_subprocess("--sim-seeds", "3")
    assert r.ret == pytest.ExitCode.USAGE_ERROR


def test_unknown_backend_lists_the_choices(pytester):
    pytester.makepyfile(test_k=KERNEL_TEST)
    r = pytester.runpytest_subprocess("--backend", "bogus")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*unknown backend(s) bogus; choose from sim, npu, cuda*"])


FIXTURE_TEST = '''
import pytest
import triton_dist

SETUPS = []

@pytest.fixture
def counted():
    SETUPS.append("setup")
    yield len(SETUPS)
    SETUPS.append("teardown")

def test_fresh_fixtures_per_seed(tmp_path, counted, monkeypatch):
    marker = tmp_path / "written-by-an-earlier-seed"
    assert not marker.exists(), "tmp_path was reused from an earlier seed"
    marker.write_text("x")
    assert not hasattr(triton_dist, "_patched_by_a_seed")
    monkeypatch.setattr(triton_dist, "_patched_by_a_seed", True, raising=False)
    assert SETUPS.count("setup") == SETUPS.count("teardown") + 1
    assert triton_dist.launch(lambda: triton_dist.rank(), world_size=2).values == [0, 1]

def test_setups_were_torn_down_in_order():
    assert SETUPS == ["setup", "teardown"] * 3
'''


def test_each_seed_gets_fresh_fixtures(pytester):
    """Issue 26 item 7: with --sim-seeds the body ran again with the first seed's fixture
    instances (a test writing into tmp_path failed on seed 2 while its replay line passed).
    Every seed gets its own function-scoped fixtures, set up and torn down in order."""
    pytester.makepyfile(test_f=FIXTURE_TEST)
    r = pytester.runpytest_subprocess("--sim-schedule", "pct", "--sim-seeds", "3")
    r.assert_outcomes(passed=2)
