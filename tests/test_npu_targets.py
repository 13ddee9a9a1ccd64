"""npu-compile for each NPU chip the installed bishengir-compile knows (issue 34, targets).

Oracle: the real bishengir-compile 1.2.0 (its --help's --target values, its own complaint about an
unknown target, the UB limit its PlanMemory states in `ub overflow, requires N bits while M bits
available!`).  A kernel tuned to fit an A5's Unified Buffer (248 KiB) overflows an A2's (192 KiB)
(triton-ascend #442, #2246).  Skipped where the tools cannot be had.
"""
import os
import re
import subprocess
import sys

import pytest

import npu_compile_kernels as K
from triton_dist.backend_ascend import pipeline, targets, toolchain
from triton_dist.cli import main

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "npu_compile_kernels.py")
TOOLS = toolchain.find()
pytestmark = pytest.mark.skipif(bool(TOOLS.missing), reason="; ".join(TOOLS.missing))

ADD_SIG = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32"
A2, A5 = "Ascend910B4", "Ascend950PR_9599"
# 28672 fp32 elements need 1835008 bits of UB (the compiler's figure): over A2's 1572864, under A5's 2031616
TUNED_FOR_A5 = "BLOCK=28672"
_OVERFLOW = re.compile(r"ub overflow, requires (\d+) bits while (\d+) bits available!")


def _cli(capsys, *args):
    try:
        rc = main(["npu-compile", *args])
    except SystemExit as e:         # a usage error (exit 2) leaves through argparse
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def _help_targets():
    """The --target values as the compiler's --help prints them (read here independently of pipeline.py)."""
    text = subprocess.run([TOOLS.compiler, "--help"], capture_output=True, text=True, timeout=60).stdout
    block = text.split("--target=<value>", 1)[1]
    return re.findall(r"^\s+=([\w.-]+)\s", block.split("\n  --", 1)[0], flags=re.M)


def test_target_list_is_the_compilers_own_with_each_chips_unified_buffer(capsys):
    rc, out, _ = _cli(capsys, "--target", "list")
    assert rc == 0, out
    listed = [line.split(":", 1)[0] for line in out.splitlines()[1:-1]]
    assert listed == _help_targets()
    assert A5 in listed and "Ascend910_9392" in listed        # A5 and A3 are there: the tool knows them
    assert f"{A2}: Atlas A2 (Ascend910B), dav-c220, Unified Buffer 192 KiB (1572864 bits" in out
    assert f"{A5}: Ascend950 (A5), dav-c310, Unified Buffer 248 KiB (2031616 bits" in out


def test_a_kernel_tuned_for_an_a5_overflows_an_a2s_unified_buffer(capsys):
    rc, out, _ = _cli(capsys, f"{KERNELS}::vector_add", "-s", ADD_SIG, "-c", TUNED_FOR_A5,
                      "--target", f"{A2},{A5}")
    assert rc == 1, out                                      # refused for one of the chips
    a2, a5 = out.split(f"== {A5}")
    assert a2.startswith(f"== {A2}: Atlas A2")
    m = _OVERFLOW.search(a2)
    assert m and f"--target {A2})" in a2, a2
    need, have = int(m.group(1)), int(m.group(2))
    assert have == targets.family(A2).ub_bits < need          # the compiler's limit is the table's
    assert f"accepted: kernel vector_add" in a5 and f"--target {A5})" in a5, a5
    assert need <= targets.family(A5).ub_bits


def test_the_a5_limit_is_the_compilers(capsys):
    # the same kernel twice as large overflows the A5 too; the limit the compiler states is the table's.
    # Before compiler_env, bishengir-compile could not find bishengir-compile-a5 and that was a "refusal".
    rc, out, _ = _cli(capsys, f"{KERNELS}::vector_add", "-s", ADD_SIG, "-c", "BLOCK=32768", "--target", A5)
    assert rc == 1, out
    m = _OVERFLOW.search(out)
    assert m and int(m.group(2)) == targets.family(A5).ub_bits, out
    assert "Cannot find bishengir-compile-a5" not in out


def test_an_unknown_chip_is_exit_2_in_the_compilers_words_with_the_list_and_nothing_cached(capsys, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", str(tmp_path))
    said = subprocess.run([TOOLS.compiler, "--target=Ascend310P1", "--version"], capture_output=True, text=True,
                          timeout=60).stderr
    own = next(line.strip() for line in said.splitlines() if "--target option" in line)
    rc, out, err = _cli(capsys, f"{KERNELS}::vector_add", "-s", ADD_SIG, "-c", "BLOCK=1024",
                        "--target", f"{A2},Ascend310P1")
    assert rc == 2, out + err
    assert own in err                              # "Cannot find option named 'Ascend310P1'!"
    assert all(t in err for t in (A2, A5, "Ascend910_9392"))
    assert "refuse" not in (out + err).lower()
    assert out == ""                               # checked before anything is compiled
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_pytest_npu_compile_targets_refuses_an_unknown_chip_at_the_start(tmp_path):
    (tmp_path / "test_nothing.py").write_text("def test_x():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--npu-compile", "--npu-compile-targets", "Ascend910B4-2", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 4, proc.stdout + proc.stderr          # pytest's usage error
    assert "Cannot find option named 'Ascend910B4-2'" in proc.stderr
    assert "Ascend910B4-1" in proc.stderr


def _add_main(block):
    import torch
    x, y, o = torch.arange(4096, dtype=torch.float32), torch.ones(4096), torch.zeros(4096)
    K.vector_add[(1,)](x, y, o, 4096, BLOCK=block)
    return float(o[:4096].sum())


def test_a_launch_is_compiled_for_each_chip_of_the_session(tmp_path, monkeypatch):
    import triton_dist
    from triton_dist.errors import RankError
    for k in ("TRITON_DIST_LAUNCH_CHECKS", "TRITON_DIST_NPU_COMPILE_SOURCES", "TRITON_DIST_NPU_COMPILE_LOG"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", str(tmp_path))
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_TARGET", A5)
    assert triton_dist.launch(_add_main, 28672, world_size=1, npu_compile=True).values == [
        float(sum(range(4096)) + 4096)]
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_TARGET", f"{A5},{A2}")
    with pytest.raises(RankError) as e:
        triton_dist.launch(_add_main, 28672, world_size=1, npu_compile=True)
    assert e.value.exc_type == "NpuCompileError"
    assert f"--target {A2})" in e.value.message and "1572864 bits available" in e.value.message


def test_a_helper_the_compiler_cannot_find_is_exit_3_not_a_refusal(capsys, tmp_path, monkeypatch):
    # a bishengir-compile without bishengir-compile-a5 beside it (nor on PATH): for an A5 target it says
    # "[ERROR] Cannot find bishengir-compile-a5 under $PATH", which is no verdict on the kernel
    alone = tmp_path / "bin" / "bishengir-compile"
    alone.parent.mkdir()
    alone.symlink_to(TOOLS.compiler)
    monkeypatch.setenv("TRITON_DIST_BISHENGIR_COMPILE", str(alone))
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    rc, out, err = _cli(capsys, f"{KERNELS}::vector_add", "-s", ADD_SIG, "-c", "BLOCK=1024", "--target", A5)
    assert rc == 3, out + err       # a compiler missing here (exit 3), not a usage error (2)
    assert "needs bishengir-compile-a5" in err and "no verdict on the kernel" in err, err
    assert "refuses" not in out + err


def test_pytest_npu_compile_targets_names_the_chips_in_the_header(tmp_path):
    (tmp_path / "test_nothing.py").write_text("def test_x():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--npu-compile", "--npu-compile-targets", f"{A2},{A5}", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"bishengir-compile from" in proc.stdout and f"target {A2},{A5}" in proc.stdout, proc.stdout


def _add_compiled():
    import torch
    x, y, o = torch.arange(64, dtype=torch.float32), torch.ones(64), torch.zeros(64)
    K.vector_add[(1,)](x, y, o, 64, BLOCK=64)
    return torch.equal(o, x + 1)


def test_the_hivm_backend_runs_the_first_chip_of_a_target_list(monkeypatch):
    import triton_dist
    monkeypatch.setenv("TRITON_DIST_NPU_COMPILE_TARGET", f"{A2},{A5}")
    assert triton_dist.launch(_add_compiled, world_size=1, backend="hivm").values == [True]
