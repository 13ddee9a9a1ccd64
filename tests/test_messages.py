"""Every message names the call the user wrote and what to do (issue 26 item 7).

Each case is a user mistake whose message, before, named another call (the primitive the
call lowers to), leaked a numpy error or an unfilled template, or said nothing at all.
The oracle is the call the kernel wrote (its name, its argument) and the documented rule
(ranks are 0..n-1; nbytes is a uint32; the RMA element types of docs/semantics.md §6).
"""
import os
import shutil
import sys

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm


def _failure(body, world_size=2, **kw) -> str:
    """What the user reads first: the failing rank's exception type and message (its traceback
    follows it, and names the simulator's own functions)."""
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=world_size, **kw)
    return f"{ei.value.exc_type}: {ei.value.message}"


@triton.jit
def _notify_kernel(sig, peer):
    dl.notify(sig, peer)


def test_notify_to_a_rank_that_does_not_exist_names_dl_notify():
    def body():
        sig = triton_dist.symm_tensor((16,), torch.int32)
        _notify_kernel[(1,)](sig, 2)
    msg = _failure(body)
    assert "dl.notify targets rank 2" in msg and "0..1" in msg and "signal_op" not in msg, msg
    assert "test_messages.py:" in msg and "dl.num_ranks()" in msg, msg       # the line, and what to do


def test_notify_on_a_host_tensor_names_dl_notify():
    def body():
        _notify_kernel[(1,)](torch.zeros(16, dtype=torch.int32), 0)
    msg = _failure(body, world_size=1)
    assert "dl.notify needs a pointer into the symmetric heap" in msg and "symm_tensor" in msg, msg
    assert "signal_op" not in msg, msg


@triton.jit
def _notify_float_rank_kernel(sig):
    dl.notify(sig, 0.5)


def test_notify_to_a_float_rank_is_refused_not_truncated():
    def body():
        sig = triton_dist.symm_tensor((16,), torch.int32)
        try:
            _notify_float_rank_kernel[(1,)](sig)
        except triton_dist.TritonDistError as e:
            return int(sig[0]), str(e)
        return int(sig[0]), "no error"
    (slot, msg), = triton_dist.launch(body, world_size=1).values
    assert slot == 0, "the signal was sent to rank 0"
    assert "dl.notify" in msg and "rank" in msg and "0.5" in msg and "integer" in msg, msg


@triton.jit
def _remote_ptr_kernel(buf, out, peer):
    tl.store(out, tl.load(shm.remote_ptr(buf, peer)))


def test_remote_ptr_to_a_rank_that_does_not_exist_names_remote_ptr():
    def body():
        buf = triton_dist.symm_tensor((16,), torch.float32)
        out = triton_dist.symm_tensor((1,), torch.float32)
        _remote_ptr_kernel[(1,)](buf, out, 3)
    msg = _failure(body)
    assert "libshmem_device.remote_ptr targets rank 3" in msg and "0..1" in msg, msg
    assert "symm_at" not in msg, msg


@triton.jit
def _putmem_kernel(dst, src, NBYTES: tl.constexpr):
    shm.putmem(dst, src, NBYTES, 0)


@pytest.mark.parametrize("nbytes", [-4, 2 ** 32])
def test_putmem_with_a_byte_count_that_is_no_uint32_says_so(nbytes):
    def body():
        a = triton_dist.symm_tensor((16,), torch.float32)
        b = triton_dist.symm_tensor((16,), torch.float32)
        _putmem_kernel[(1,)](a, b, NBYTES=nbytes)
    msg = _failure(body, world_size=1)
    assert "TritonDistError" in msg and "OverflowError" not in msg, msg
    assert "libshmem_device.putmem" in msg and "nbytes" in msg and str(nbytes) in msg, msg
    assert "4294967295" in msg, msg                                         # the range it must be in


@triton.jit
def _putmem_signal_kernel(dst, src, sig):
    shm.putmem_signal(dst, src, 64, sig, 1, shm.ACLSHMEM_SIGNAL_SET, 0)


def test_putmem_signal_on_fp64_names_the_dtype_not_a_template():
    def body():
        a = triton_dist.symm_tensor((8,), torch.float64)
        b = triton_dist.symm_tensor((8,), torch.float64)
        sig = triton_dist.symm_tensor((16,), torch.int32)
        _putmem_signal_kernel[(1,)](a, b, sig)
    msg = _failure(body, world_size=1)
    assert "{type}" not in msg, msg
    assert "libshmem_device.putmem_signal" in msg and "fp64" in msg and "fp32" in msg, msg


@triton.jit
def _store_kernel(buf, N: tl.constexpr):
    tl.store(buf + tl.arange(0, N), tl.arange(0, N))


def _freed_site():
    return f"{os.path.basename(__file__)}:"


@pytest.mark.parametrize("reused", [False, True], ids=["slot-free", "slot-reused"])
def test_kernel_through_a_freed_tensor_is_told_it_was_freed(reused):
    def body():
        a = triton_dist.symm_tensor((16,), torch.int32)          # symm tensor #0
        b = triton_dist.symm_tensor((16,), torch.int32)          # #1, its live neighbour
        triton_dist.free(a)
        if reused:
            c = triton_dist.symm_tensor((16,), torch.int32)      # #2, at a's old offset  # noqa: F841
        _store_kernel[(1,)](a, N=16)
        return b
    msg = _failure(body, world_size=1)
    assert "symm tensor #0 (int32[16])" in msg and "freed" in msg, msg
    assert "triton_dist.free" in msg and _freed_site() in msg, msg          # where it was freed
    assert "#1" not in msg and "#2" not in msg, msg                          # no live tensor blamed


def test_zero_size_symm_tensors_free_cleanly(monkeypatch):
    from triton_dist.symm_heap import ALIGN, RESERVED_BYTES
    # room for 2 allocations: a leaked slot per zero-size tensor exhausts it on the third
    monkeypatch.setenv("TRITON_DIST_HEAP_SIZE", str(RESERVED_BYTES + 2 * ALIGN))

    def body():
        for _ in range(6):
            z = triton_dist.symm_tensor((0, 4), torch.float32)
            assert tuple(z.shape) == (0, 4)
            triton_dist.free(z)
        t = triton_dist.symm_tensor((2 * ALIGN // 4,), torch.float32)   # the whole heap is free again
        return t.numel()
    assert triton_dist.launch(body, world_size=2).values == [2 * ALIGN // 4] * 2


@triton.jit
def _u64_kernel(sig, V: tl.constexpr):
    dl.notify(sig, 0, signal=V)
    dl.wait(sig, 1, "sys", "acquire", waitValue=V)


@pytest.mark.parametrize("schedule", ["free", "pct"])
def test_uint64_signals_take_their_whole_range(schedule):
    v = 2 ** 63 + 5

    def body():
        sig = triton_dist.symm_tensor((8,), torch.uint64)
        _u64_kernel[(1,)](sig, V=v)
        return int(sig.view(torch.int64)[0]) % 2 ** 64
    assert triton_dist.launch(body, world_size=1, schedule=schedule, seed=0).values == [v]


@triton.jit
def _u64_wait_kernel(sig, V: tl.constexpr):
    dl.wait(sig, 1, "sys", "acquire", waitValue=V)


@pytest.mark.parametrize("schedule", ["free", "pct"])
def test_uint64_wait_that_never_ends_reports_the_awaited_value(schedule):
    v = 2 ** 64 - 1

    def body():
        sig = triton_dist.symm_tensor((8,), torch.uint64)
        _u64_wait_kernel[(1,)](sig, V=v)
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(body, world_size=1, schedule=schedule, seed=0, timeout=30)
    assert f"awaits {v}, sees 0" in str(ei.value), str(ei.value)


NON_ASCII_KERNEL = '''
import torch, triton, triton.language as tl
import triton_dist
import triton_dist.language as dl

@triton.jit
def {name}(sig):
    dl.wait(sig, 1, "sys", "acquire", waitValue=1)      # nobody signals: a deadlock

def body():
    sig = triton_dist.symm_tensor((16,), torch.int32)
    {name}[(1,)](sig)
'''


@pytest.mark.parametrize("schedule", ["free", "pct"])
def test_reports_survive_non_ascii_file_and_kernel_names(schedule, tmp_path, monkeypatch):
    name = "k" + "ядро_ожидания_сигнала_" * 3 + "k"            # 2 bytes a letter: cuts fall inside letters
    path = tmp_path / ("ожидание_" * 4 + ".py")
    path.write_text(NON_ASCII_KERNEL.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = __import__(path.stem)
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(mod.body, world_size=1, schedule=schedule, seed=0, timeout=30)
    text = str(ei.value) + getattr(ei.value, "events", "")
    assert "UnicodeDecodeError" not in text and "awaits 1, sees 0" in text, text
    assert "ядро" in text and "ожидание" in text, text
    sys.modules.pop(path.stem, None)


# ---- pytest's and the CLI's own messages: each points at what to type next ------------------------

@pytest.fixture
def _repo_path(monkeypatch):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))


PASSING_TEST = '''
import triton_dist
def test_two_ranks():
    assert triton_dist.launch(lambda: triton_dist.rank(), world_size=2).values == [0, 1]
'''


@pytest.mark.parametrize("schedule", [[], ["--sim-schedule", "free"]])
def test_sim_seeds_without_a_schedule_names_every_deterministic_one(pytester, _repo_path, schedule):
    """--sim-seeds under the free schedule is a usage error that names all four schedules that
    take seeds (it said "random or pct", though explore and aware work and other messages
    recommend explore); with one of them it runs."""
    pytester.makepyfile(test_k=PASSING_TEST)
    r = pytester.runpytest_subprocess("--sim-seeds", "2", *schedule)
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert "--sim-schedule explore" in err and all(s in err for s in ("aware", "random", "pct")), err
    ok = pytester.runpytest_subprocess("--sim-seeds", "2", "--sim-schedule", "aware")
    assert ok.ret == pytest.ExitCode.OK, ok.stdout.str() + ok.stderr.str()


UB_TEST = '''
import torch, triton, triton.language as tl
import triton_dist

@triton.jit
def big_add(x, y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs) + 1.0)

def body(block):
    x = torch.zeros(block)
    y = torch.zeros(block)
    big_add[(1,)](x, y, BLOCK=block)
    assert torch.equal(y, x + 2), "y is x + 1, not x + 2"

def test_too_big_for_the_unified_buffer():
    triton_dist.launch(body, 131072, world_size=1)      # 512 KiB per block: over 192 KiB

def test_a_wrong_expectation():
    triton_dist.launch(body, 1024, world_size=1)        # fits; the test's own assert fails
'''


def test_an_npu_compile_refusal_has_no_schedule_hint(pytester, _repo_path, monkeypatch):
    """A kernel the real compilers refuse is refused under every schedule: its failure says what
    the compiler said and what to shrink, not the free schedule's 'reproduce it ... --sim-seeds 50
    ... --sim-race-check' (it did).  The other side: a test's own failure keeps that hint."""
    # the inner session's own --npu-compile, not this session's (CI's --npu-compile-sources would
    # leave the inner test's kernel out, and its log would join ours)
    for var in ("TRITON_DIST_LAUNCH_CHECKS", "TRITON_DIST_NPU_COMPILE_SOURCES", "TRITON_DIST_NPU_COMPILE_LOG"):
        monkeypatch.delenv(var, raising=False)
    from triton_dist.backend_ascend import toolchain
    missing = toolchain.find().missing
    if missing:
        pytest.skip("; ".join(missing))
    pytester.makepyfile(test_ub=UB_TEST)
    r = pytester.runpytest_subprocess("--npu-compile", "-p", "no:cacheprovider")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    ub, own = out.split("test_a_wrong_expectation", 1)[0], out.split("_ test_a_wrong_expectation _", 1)[1]
    assert "ub overflow" in ub and "BLOCK=" in ub, out
    assert "free schedule" not in ub and "--sim-race-check" not in ub, ub
    assert "free schedule" in own and "--sim-seeds 50" in own, own


FAILING_LAUNCH_TEST = '''
import triton_dist

def body():
    assert triton_dist.rank() == 5, "rank is not 5"

def test_fails():
    triton_dist.launch(body, world_size=2)
'''


def test_a_failed_launch_is_shown_at_the_users_call(pytester, _repo_path):
    """pytest shows the test's own line and the rank's traceback, not launch()'s source (it
    printed triton_dist/launcher.py, sim/backend.py and ~25 lines of sim/launch.py's launch)."""
    pytester.makepyfile(test_tb=FAILING_LAUNCH_TEST)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "test_tb.py:7: RankError" in out and 'assert triton_dist.rank() == 5, "rank is not 5"' in out, out
    assert "def launch(" not in out and "launcher.py:" not in out and "sim/backend.py:" not in out, out


def test_only_launch_failures_hide_our_frames():
    """The other side: an exception that is a fault of ours (not a launch failure or a misuse
    triton_dist reports) keeps its frames."""
    from triton_dist.launcher import hide_launch_frames
    for exc, hidden in ((triton_dist.RankError(1, "AssertionError", "x"), True),
                        (triton_dist.TritonDistError("bad peer"), True), (ValueError("ours"), False)):
        try:
            raise exc
        except Exception:
            assert hide_launch_frames(pytest.ExceptionInfo.from_current()) is hidden, exc


NPU_MARKED_TEST = '''
import pytest

@pytest.mark.backend("npu")
def test_needs_an_npu():
    assert False, "must not run without an NPU"

def test_on_backend(backend):
    pass
'''


def test_a_backend_skip_is_reported_at_the_tests_line(pytester, _repo_path):
    """`pytest -rs`: the npu marker's skip and the backend fixture's name the test file and line
    (they named triton_dist/pytest_plugin/__init__.py, the line of its pytest.skip)."""
    if shutil.which("npu-smi"):
        pytest.skip("checks the skip of a machine without an NPU")
    pytester.makepyfile(test_npu=NPU_MARKED_TEST)
    r = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider", "--backend", "sim,npu")
    out = r.stdout.str()
    skips = [ln for ln in r.outlines if ln.startswith("SKIPPED")]
    assert len(skips) == 2 and r.ret == pytest.ExitCode.OK, out
    assert any("test_npu.py:3:" in ln for ln in skips) and any("test_npu.py:7:" in ln for ln in skips), out
    assert "pytest_plugin" not in "\n".join(skips), out


def _send_tile(tmp_path, fence: bool):
    """The README's first kernel (its oracle: rank 1 compares what it read with torch's tile),
    with or without its fence."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        from test_readme_program import _block, _twin
    finally:
        sys.path.pop(0)
    program = _block("# send_tile.py")
    name = "send_tile.py" if fence else "send_tile_nofence.py"
    (tmp_path / name).write_text(program if fence else _twin(program))
    return name


def _cli(args, cwd):
    import subprocess
    env = dict(os.environ, TRITON_DIST_BACKEND="sim", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "triton_dist.cli", *args], capture_output=True, text=True,
                       timeout=300, env=env, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def test_explore_summary_groups_failures_by_the_diagnosis(tmp_path):
    """explore's summary shows the diagnosis replay prints first ([fence] and its words), with the
    count of seeds that failed that way; it showed 'N x rank 1 raised AssertionError' only."""
    name = _send_tile(tmp_path, fence=False)
    rc, out, err = _cli(["explore", "-n", "2", name, "--seeds", "2"], tmp_path)
    assert rc == 1, out + err
    kinds = [ln for ln in out.splitlines() if " x " in ln]
    assert len(kinds) == 1 and "x [fence] rank 1 raised AssertionError" in kinds[0], out
    assert "the device model saw: [fence]" in out and "Fix: call libshmem_device.fence()" in out, out


def test_explore_summary_of_the_fenced_kernel_has_no_diagnosis(tmp_path):
    name = _send_tile(tmp_path, fence=True)
    rc, out, err = _cli(["explore", "-n", "2", name, "--seeds", "2"], tmp_path)
    assert rc == 0 and "2 passed, 0 failed" in out and "[fence]" not in out, out + err


def test_the_replay_event_log_has_column_headers(tmp_path):
    """The event log names its columns, and a tile store shows the data it wrote (src[0] = 1, by
    torch's arange + 1), not '= 0, saw 1' as if 0 had been stored."""
    name = _send_tile(tmp_path, fence=False)
    rc, out, err = _cli(["replay", "-n", "2", name, "--schedule", "explore", "--seed", "0"], tmp_path)
    log = (out + err).split("steps:\n", 1)[1].splitlines()
    assert "kernel line" in log[0] and "address" in log[0] and "value (" in log[0] and "saw (" in log[0], log[0]
    stores = [ln for ln in log if " store  " in ln and "'data' allocated" in ln]
    assert stores and stores[0].endswith("  saw 1") and " = 0" not in stores[0], "\n".join(log)


def test_npu_compile_tells_missing_compilers_from_a_usage_error(tmp_path, monkeypatch, capsys):
    """Exit 3 and 'not here' when the compilers are missing; exit 2 for a wrong argument (both were
    2); --help lists the statuses.  In-process, as a user's shell would see the status."""
    from triton_dist.cli import main

    def cli(*args):
        try:
            rc = main(list(args))
        except SystemExit as e:         # a usage error, or --help, leaves through argparse
            rc = e.code
        got = capsys.readouterr()
        return rc, got.out, got.err

    name = str(tmp_path / _send_tile(tmp_path, fence=True))
    sig = ["--signature", "data=*fp32,sig=*i32,src=*fp32,out=*fp32", "--constexpr", "N=16"]
    with monkeypatch.context() as m:
        m.setenv("TRITON_DIST_BISHENGIR_COMPILE", "/nonexistent/bishengir-compile")
        rc, out, err = cli("npu-compile", f"{name}::send_tile", *sig)
    assert rc == 3 and "NPU compilers are not here" in err and "/nonexistent/bishengir-compile" in err, out + err
    rc, out, err = cli("npu-compile", f"{name}::no_such_kernel", *sig)
    assert rc == 2 and "defines no 'no_such_kernel'" in err, out + err
    rc, out, err = cli("npu-compile", "--help")
    text = " ".join(out.split())
    assert rc == 0 and "1 refused by the compilers" in text and "3 the compilers are not installed here" in text, out


SEEDS_TEST = '''
import triton_dist
from send_tile_nofence import main

def test_once():
    assert all(triton_dist.launch(main, world_size=2).values)

def test_twice():
    assert all(triton_dist.launch(main, world_size=2).values)
'''


def test_sim_seeds_session_groups_failed_tests_by_the_diagnosis(pytester, _repo_path):
    """pytest --sim-seeds ends with the failed tests grouped by what the device model saw, one
    example each (the seed and the [fence] finding); there was no such summary."""
    _send_tile(pytester.path, fence=False)
    pytester.makepyfile(test_twin=SEEDS_TEST)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sim-schedule", "explore", "--sim-seeds", "2")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "failed tests by what the device model saw" in out, out
    kinds = [ln for ln in r.outlines if " x [" in ln]
    assert len(kinds) == 1 and "2 x [fence]" in kinds[0] and "at seed 0" in kinds[0], out
    assert "Fix: call libshmem_device.fence()" in kinds[0], kinds


def test_a_passing_session_has_no_diagnosis_summary(pytester, _repo_path):
    pytester.makepyfile(test_k=PASSING_TEST)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sim-schedule", "explore", "--sim-seeds", "2")
    assert r.ret == pytest.ExitCode.OK and "by what the device model saw" not in r.stdout.str(), r.stdout.str()
