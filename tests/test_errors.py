"""Bad input gets a clear error on every rank, and nothing hangs or is left behind."""
import os
import signal
import threading
import time

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl

import dev_shm
from triton_dist.language.extra import libshmem_device as shm


@triton.jit
def symm_at_kernel(ptr, out):
    tl.store(out, tl.load(dl.symm_at(ptr, 0)))


@triton.jit
def notify_kernel(sig, peer):
    dl.notify(sig, peer, signal=1, sig_op="set")


@triton.jit
def notify_add_kernel(sig):
    dl.notify(sig, 0, signal=1, sig_op="add")


@triton.jit
def wait_kernel(sig):
    dl.wait(sig, 1, "gpu", "acquire", waitValue=1)


def _run_on_local_tensor(kernel_name):
    local = torch.zeros(16, dtype=torch.int32)     # not on the symmetric heap
    out = torch.zeros(1, dtype=torch.int32)
    if kernel_name == "symm_at":
        symm_at_kernel[(1,)](local, out)
    elif kernel_name == "notify":
        notify_kernel[(1,)](local, 0)
    else:
        wait_kernel[(1,)](local)


@pytest.mark.parametrize("op", ["symm_at", "notify", "wait"])
def test_pointer_outside_symmetric_heap(op):
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_run_on_local_tensor, op, world_size=2)
    msg = str(ei.value)
    assert "symmetric heap" in msg and "symm_tensor" in msg
    assert "test_errors.py:" in msg                 # names the kernel line


def _peer_out_of_range():
    sig = triton_dist.symm_tensor((16,), torch.int32)
    notify_kernel[(1,)](sig, 5)


def test_peer_rank_out_of_range():
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_peer_out_of_range, world_size=2)
    assert "targets rank 5" in str(ei.value) and "0..1" in str(ei.value)


@pytest.mark.parametrize("dtype,op,words", [
    (torch.int64, "add", "set' only"),
    (torch.float32, "set", "not allowed on Ascend"),
    (torch.int16, "set", "not allowed on Ascend"),
])
def test_notify_dtype_rules(dtype, op, words):
    def body():
        sig = triton_dist.symm_tensor((16,), dtype)
        if op == "add":
            notify_add_kernel[(1,)](sig)
        else:
            notify_kernel[(1,)](sig, 0)
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=1)
    assert words in str(ei.value)


def test_int64_set_is_allowed():
    def body():
        sig = triton_dist.symm_tensor((8,), torch.int64)
        notify_kernel[(1,)](sig, 0)
        return sig[0].item()
    assert triton_dist.launch(body, world_size=1).values == [1]


def test_symm_tensor_mismatched_shapes_fail_on_every_rank():
    def body():
        r = triton_dist.rank()
        try:
            triton_dist.symm_tensor((16 + r,), torch.float32)
        except triton_dist.TritonDistError as e:
            return str(e)
        return "no error"
    res = triton_dist.launch(body, world_size=3)
    for msg in res.values:
        assert "collective" in msg and "(16,)" in msg and "(18,)" in msg


def test_symm_tensor_mismatched_dtypes():
    def body():
        triton_dist.symm_tensor((4,), torch.float32 if triton_dist.rank() == 0 else torch.int32)
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=2)
    assert "torch.float32" in str(ei.value) and "torch.int32" in str(ei.value)


def test_free_in_different_order():
    def body():
        a = triton_dist.symm_tensor((4,), torch.float32)
        b = triton_dist.symm_tensor((4,), torch.float32)
        triton_dist.free(a if triton_dist.rank() == 0 else b)
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=2)
    assert "free is collective" in str(ei.value)


def test_free_of_foreign_tensor():
    def body():
        triton_dist.free(torch.zeros(3))
    with pytest.raises(triton_dist.RankError, match="not returned by triton_dist.symm_tensor"):
        triton_dist.launch(body, world_size=1)


@triton.jit
def oob_kernel(buf, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(buf + offs + 1_000_000_000, offs)


def test_out_of_bounds_store_names_the_line():
    def body():
        buf = triton_dist.symm_tensor((16,), torch.int32)
        oob_kernel[(1,)](buf, N=16)
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=1)
    msg = str(ei.value)
    assert "outside every known buffer" in msg and "test_errors.py:" in msg and "oob_kernel" in msg


def test_unpicklable_fn_and_return_value():
    lock = threading.Lock()          # a closure over a lock cannot be pickled...
    res = triton_dist.launch(lambda: lock.locked(), world_size=2)   # ...but ranks are forked
    assert res.values == [False, False]
    with pytest.raises(triton_dist.RankError, match="cannot be sent back"):
        triton_dist.launch(lambda: (i for i in range(3)), world_size=2)   # a generator


@pytest.mark.parametrize("kwargs,words", [
    (dict(world_size=0), "world_size"),
    (dict(world_size=2, schedule="sometimes"), "schedule"),
    (dict(world_size=2, memory_model="magic"), "memory_model"),
    (dict(world_size=2, timeout=-1), "timeout"),
    (dict(world_size=2, backend="gpu"), "backend"),
    (dict(world_size=2, backend="npu"), "needs an Ascend NPU"),
])
def test_bad_launch_arguments(kwargs, words):
    with pytest.raises(triton_dist.TritonDistError, match=words):
        triton_dist.launch(lambda: None, **kwargs)


def test_not_callable():
    with pytest.raises(triton_dist.TritonDistError, match="callable"):
        triton_dist.launch(42, world_size=1)


@triton.jit
def wait_forever_kernel(sig):
    dl.wait(sig, 1, "gpu", "acquire", waitValue=1)


def _one_raises_other_waits():
    sig = triton_dist.symm_tensor((16,), torch.int32)
    if triton_dist.rank() == 1:
        raise ValueError("boom in rank 1")
    wait_forever_kernel[(1,)](sig)


def test_exception_in_one_rank_while_other_waits():
    t = time.monotonic()
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_one_raises_other_waits, world_size=2, timeout=300)
    assert time.monotonic() - t < 150          # ended by the error, long before the timeout (any load)
    e = ei.value
    assert e.rank == 1 and e.exc_type == "ValueError" and "boom in rank 1" in str(e)
    assert "_one_raises_other_waits" in e.traceback


def _killed():
    sig = triton_dist.symm_tensor((16,), torch.int32)
    if triton_dist.rank() == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    wait_forever_kernel[(1,)](sig)


def test_sigkilled_rank():
    before = dev_shm.ours()
    t = time.monotonic()
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_killed, world_size=3, timeout=300)
    assert time.monotonic() - t < 150          # ended by the death, long before the timeout (any load)
    assert ei.value.rank == 2 and "SIGKILL" in str(ei.value)
    assert dev_shm.ours() <= before, dev_shm.ours() - before


def test_deadlock_report_names_rank_line_address_and_values():
    def body():
        sig = triton_dist.symm_tensor((16,), torch.int32)
        wait_forever_kernel[(1,)](sig)     # nobody ever notifies
    t = time.monotonic()
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(body, world_size=2, timeout=300)
    assert time.monotonic() - t < 150          # a verdict, long before the timeout (any load)
    assert not isinstance(ei.value, TimeoutError)        # a verdict, not a timeout
    rep = str(ei.value)
    for r in (0, 1):
        assert f"rank {r} core 0: wait at test_errors.py:" in rep
    assert "symm tensor #0 (int32[16]) of rank 0, element 0" in rep
    assert "awaits 1, sees 0" in rep


def test_timeout_ends_a_long_wait():
    def body():
        sig = triton_dist.symm_tensor((16,), torch.int32)
        if triton_dist.rank() == 0:
            wait_forever_kernel[(1,)](sig)
        else:
            time.sleep(30)            # busy host code: not a deadlock, but past the timeout
    t = time.monotonic()
    with pytest.raises(triton_dist.LaunchTimeoutError, match="timed out after 2 s") as ei:
        triton_dist.launch(body, world_size=2, timeout=2)
    assert time.monotonic() - t < 29           # not waiting for the sleeping rank's 30 s
    # a TimeoutError that is not a deadlock verdict, and says how to give it more time
    assert isinstance(ei.value, TimeoutError) and not isinstance(ei.value, triton_dist.DeadlockError)
    assert "timeout=" in str(ei.value) and "no deadlock was detected" in str(ei.value)


def test_ranks_do_not_hang_after_the_launcher_used_openmp():
    # GNU OpenMP does not survive fork; the launcher's ranks must not enter it.
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        a = torch.randn(512, 512)
        (a @ a).sum()                          # starts this process's OpenMP pool

        def body():
            x = torch.randn(512, 512)
            return float((x @ x).sum() * 0)
        assert triton_dist.launch(body, world_size=2, timeout=120).values == [0.0, 0.0]
    finally:
        torch.set_num_threads(before)


# ---- bad input: a clear error before anything runs, nothing lost (issue 14 item 13) --------------

def _touch_marker(path):
    open(path, "w").close()


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -float("inf"), True, "5", 0])
def test_bad_timeouts_are_refused(timeout):
    with pytest.raises(triton_dist.TritonDistError, match="timeout must be a positive, finite number of seconds"):
        triton_dist.launch(lambda: None, world_size=1, timeout=timeout)


@pytest.mark.parametrize("seed", ["7", 1.5, True, [1]])
@pytest.mark.parametrize("schedule", ["free", "pct"])
def test_seeds_of_the_wrong_type_are_refused(seed, schedule, tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(triton_dist.TritonDistError) as ei:
        triton_dist.launch(_touch_marker, str(marker), world_size=1, schedule=schedule, seed=seed)
    assert "seed must be an int" in str(ei.value) and repr(seed) in str(ei.value)
    assert not marker.exists()


@pytest.mark.parametrize("trace", [True, 1, b"out.json"])
def test_trace_must_be_a_path(trace, tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(triton_dist.TritonDistError, match="trace must be a file path"):
        triton_dist.launch(_touch_marker, str(marker), world_size=1, trace=trace)
    assert not marker.exists()
    os.fstat(1)                                       # stdout is still open


def test_trace_in_a_missing_directory_is_refused_before_the_run(tmp_path):
    import glob
    import tempfile
    leaked = set(glob.glob(os.path.join(tempfile.gettempdir(), "triton_dist-trace-*")))
    marker = tmp_path / "ran"
    with pytest.raises(triton_dist.TritonDistError) as ei:
        triton_dist.launch(_touch_marker, str(marker), world_size=1, trace=str(tmp_path / "nope" / "t.json"))
    assert "does not exist" in str(ei.value) and str(tmp_path / "nope") in str(ei.value)
    assert not marker.exists()                         # nothing ran, so no result was lost
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "triton_dist-trace-*"))) <= leaked


@pytest.mark.parametrize("shape", [(2.5,), ("3",), (True, 2), 4.0, (None,)])
def test_symm_tensor_shapes_that_are_not_ints_are_refused(shape):
    def body():
        triton_dist.symm_tensor(shape, torch.float32)
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=1)
    assert "shape must be a tuple of ints" in str(ei.value)


def test_symm_tensor_takes_torch_and_numpy_ints():
    import numpy as np

    def body():
        return list(triton_dist.symm_tensor(torch.Size([2, np.int64(3)]), torch.float32).shape)
    assert triton_dist.launch(body, world_size=1).values == [[2, 3]]


@pytest.mark.parametrize("value", ["abc", "-100000", "0", "1000", "1.5e6", ""])
def test_bad_heap_size_env_says_what_to_do(value, monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_DIST_HEAP_SIZE", value)
    if value == "":                                   # empty: the default
        assert triton_dist.launch(lambda: 1, world_size=1).values == [1]
        return
    marker = tmp_path / "ran"
    with pytest.raises(triton_dist.TritonDistError) as ei:
        triton_dist.launch(_touch_marker, str(marker), world_size=1)
    msg = str(ei.value)
    assert "TRITON_DIST_HEAP_SIZE" in msg and repr(value) in msg and "bytes" in msg
    assert not marker.exists()


def test_heap_size_env_is_taken_at_launch(monkeypatch):
    monkeypatch.setenv("TRITON_DIST_HEAP_SIZE", str(1 << 20))

    def body():
        triton_dist.symm_tensor((1 << 20,), torch.uint8)   # 1 MiB does not fit a 1 MiB heap (reserved start)
    with pytest.raises(triton_dist.RankError, match="TRITON_DIST_HEAP_SIZE"):
        triton_dist.launch(body, world_size=1)


@pytest.mark.parametrize("schedule", ["free", "pct"])
def test_collective_after_a_peer_returned_says_so(schedule):
    def body():
        if triton_dist.rank() == 0:
            triton_dist.barrier()
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=2, schedule=schedule, seed=1, timeout=20)
    msg = str(ei.value)
    assert ei.value.rank == 0 and "barrier" in msg and "rank 1" in msg
    assert "same host collectives in the same order" in msg


class _Unloadable:
    def __reduce__(self):
        return (_fail_on_load, ())


def _fail_on_load():
    raise ValueError("not loadable here")


def test_return_value_that_fails_to_unpickle_names_the_rank():
    def body():
        return _Unloadable() if triton_dist.rank() == 1 else 0
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=2)
    msg = str(ei.value)
    assert ei.value.rank == 1 and "rank 1" in msg and "not loadable here" in msg and "plain data" in msg
