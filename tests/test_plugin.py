"""The pytest plugin, checked with pytest's own pytester."""
import pytest

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
    assert backend in ("sim", "npu")
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
