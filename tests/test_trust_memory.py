"""Issue 14 items 3, 4, 6, 7: the simulator's verdicts on memory are trustworthy.

- item 3: an acquiring atomic synchronises with the release whose value it READ (no false
  race on a correct atomic-spin consumer; its unsynchronised twin is still caught);
- item 4: every access falls inside one live allocation (symmetric tensor or tensor
  argument), never into the device library's reserved area; the error names the tensor,
  its size, the offset and the kernel line;
- item 6: a wait value that does not fit the signal's dtype is rejected, on every path;
- item 7: the kernel-end write-back never writes a byte outside the buffers the
  simulation owns.

Oracles: hand-derived outcomes (which kernel is correctly synchronised, which index is out
of bounds, which bytes a host tensor's neighbours hold), never the simulator's own output.
"""
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm

N = 16


# ---- item 3: atomics acquire what they read -----------------------------------------------

@triton.jit
def atomic_spin_consumer(data, src, dst, sig, N: tl.constexpr, SEM: tl.constexpr):
    offs = tl.arange(0, N)
    if dl.rank() == 0:
        shm.putmem(data, src, N * 4, 1)
        shm.quiet()                                   # the data is complete before the signal
        dl.notify(sig, 1, signal=1, sig_op="set")
    else:
        while tl.atomic_add(sig, 0, sem=SEM) != 1:    # an atomic poll of the signal
            pass
        tl.store(dst + offs, tl.load(data + offs))


def _atomic_spin(sem):
    data = triton_dist.symm_tensor((N,), torch.float32)
    src = triton_dist.symm_tensor((N,), torch.float32)
    dst = triton_dist.symm_tensor((N,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    src.fill_(triton_dist.rank() + 1)
    triton_dist.barrier()
    atomic_spin_consumer[(1,)](data, src, dst, sig, N=N, SEM=sem)
    triton_dist.barrier()
    return dst.tolist()


@pytest.fixture
def slow_atomics(monkeypatch):
    """Widen the window between the start of an atomic and the moment it reads memory (a
    preempted core): a SET that lands in it is what the atomic reads."""
    import time
    from triton_dist.sim import access

    real = access._cpu

    class Slow:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def atomic_rmw(*a):
            time.sleep(0.002)
            return real.atomic_rmw(*a)
    monkeypatch.setattr(access, "_cpu", Slow())       # the ranks are forked: they inherit it


def test_atomic_spin_consumer_has_no_race_free_schedule(slow_atomics):
    for _ in range(3):
        res = triton_dist.launch(_atomic_spin, "acquire", world_size=2, race_check="report", timeout=30)
        assert res.values[1] == [1.0] * N
        assert res.races == [], "\n".join(map(str, res.races))


def test_atomic_spin_consumer_has_no_race_under_seeds():
    for seed in range(8):
        res = triton_dist.launch(_atomic_spin, "acquire", world_size=2, race_check="report", timeout=30,
                                 schedule="random", seed=seed)
        assert res.values[1] == [1.0] * N
        assert res.races == [], f"seed {seed}: " + "\n".join(map(str, res.races))


def test_relaxed_atomic_spin_is_a_race(slow_atomics):
    res = triton_dist.launch(_atomic_spin, "relaxed", world_size=2, race_check="report", timeout=30)
    assert any({r.first.op, r.second.op} == {"putmem writes", "loads"} for r in res.races), \
        "\n".join(map(str, res.races)) or "no race found"


# ---- item 6: a wait value must fit the signal's dtype -----------------------------------------

@triton.jit
def wait_too_big(sig, V: tl.constexpr):
    dl.wait(sig, 1, "sys", "acquire", waitValue=V)


@triton.jit
def wait_too_big_runtime(sig, v):
    dl.wait(sig, 1, "sys", "acquire", waitValue=v)


@triton.jit
def signal_wait_until_too_big(sig, V: tl.constexpr):
    shm.signal_wait_until(sig, shm.ACLSHMEM_CMP_EQ, V)


def _wait_value(kernel, dtype, value, constexpr=True):
    sig = triton_dist.symm_tensor((16,), dtype)
    if constexpr:
        kernel[(1,)](sig, V=value)
    else:
        kernel[(1,)](sig, value)


@pytest.mark.parametrize("kernel, dtype, value, constexpr", [
    (wait_too_big, torch.int32, 2 ** 32, True),            # truncated to 0: returned at once
    (wait_too_big, torch.int32, 2 ** 31, True),
    (wait_too_big, torch.int32, -2 ** 31 - 1, True),
    (wait_too_big_runtime, torch.int32, 2 ** 32, False),   # an int64 kernel argument
    (signal_wait_until_too_big, torch.int32, 2 ** 32, True),
])
def test_wait_value_that_does_not_fit_is_rejected(kernel, dtype, value, constexpr):
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_wait_value, kernel, dtype, value, constexpr, world_size=1, timeout=120)
    text = str(ei.value)
    assert "does not fit" in text and str(value) in text and "int32" in text, text
    assert "test_trust_memory.py" in text, text          # the kernel line


@triton.jit
def wait_for_big(sig, V: tl.constexpr):
    if dl.rank() == 0:
        dl.notify(sig, 1, signal=V, sig_op="set")
    else:
        dl.wait(sig, 1, "sys", "acquire", waitValue=V)


def test_wait_value_at_the_edge_of_int64_works():
    def body():
        sig = triton_dist.symm_tensor((16,), torch.int64)
        wait_for_big[(1,)](sig, V=2 ** 40)
        triton_dist.barrier()
        return sig[0].item()
    res = triton_dist.launch(body, world_size=2, timeout=30)
    assert res.values[1] == 2 ** 40


@pytest.mark.parametrize("kernel, what", [(wait_too_big, "wait: waitValue"),
                                          (signal_wait_until_too_big, "signal_wait_until: cmp_val")])
def test_wait_value_that_does_not_fit_is_rejected_when_compiling(kernel, what):
    """The same rule in the language layer rejects it in the Ascend lowering too."""
    pytest.importorskip("triton_dist.backend_ascend")
    from triton_dist.backend_ascend import lower
    from triton_dist.errors import TritonDistError
    with pytest.raises(TritonDistError, match=f"{what} 4294967296 does not fit the signal's dtype int32"):
        lower(kernel, {"sig": "*i32"}, {"V": 2 ** 32})


@triton.jit
def notify_too_big(sig, V: tl.constexpr):
    dl.notify(sig, 0, signal=V, sig_op="set")


def test_signal_value_that_does_not_fit_is_rejected():
    with pytest.raises(triton_dist.RankError, match="notify: signal 4294967296 does not fit"):
        triton_dist.launch(_wait_value, notify_too_big, torch.int32, 2 ** 32, True, world_size=1, timeout=120)


# ---- item 4: every access inside one live allocation ------------------------------------------

@triton.jit
def scalar_store_at(a, b, I: tl.constexpr):
    tl.store(a + I, 7)


@triton.jit
def block_store_at(a, b, I: tl.constexpr):
    offs = tl.arange(0, 16)
    tl.store(a + I + offs, offs)


@triton.jit
def masked_block_store(a, b, I: tl.constexpr):
    offs = tl.arange(0, 32)
    tl.store(a + offs, offs, mask=offs < 16)          # lanes 16..31 are off: not accesses


@triton.jit
def atomic_at(a, b, I: tl.constexpr):
    tl.atomic_add(a + I, 1)


@triton.jit
def wait_past_the_tensor(a, b, I: tl.constexpr):
    dl.wait(a, I, "sys", "acquire", waitValue=0)      # slots 64 bytes apart: I slots need 64*(I-1)+4 bytes


@triton.jit
def put_past_the_tensor(a, b, I: tl.constexpr):
    shm.putmem(a, b, I * 4, 0)


def _bounds(kernel, index):
    a = triton_dist.symm_tensor((16,), torch.int32)
    b = triton_dist.symm_tensor((16,), torch.int32)
    kernel[(1,)](a, b, I=index)
    return b.tolist()


def _oob(kernel, index):
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_bounds, kernel, index, world_size=1, timeout=120)
    return str(ei.value)


@pytest.mark.parametrize("kernel", [scalar_store_at, block_store_at, atomic_at])
def test_access_past_a_symmetric_tensor_is_reported(kernel):
    # a[128] is 512 bytes in: the next allocation (b) on the heap, silently, before
    text = _oob(kernel, 128)
    assert "symm tensor #0 (int32[16])" in text and "64 bytes" in text, text
    assert "512" in text and "test_trust_memory.py" in text and kernel.fn.__name__ in text, text


def test_access_into_the_padding_of_an_allocation_is_reported():
    text = _oob(scalar_store_at, 16)                   # a[16]: still inside a's 512-byte slot
    assert "symm tensor #0 (int32[16])" in text and "64 bytes" in text and "offset 64" in text, text


def test_negative_index_into_the_library_state_is_reported():
    text = _oob(scalar_store_at, -(64 * 1024) // 4)    # the heap's first bytes: the barrier counter
    assert "reserved" in text and "device library" in text, text


def test_wait_whose_slots_run_past_the_tensor_is_reported():
    text = _oob(wait_past_the_tensor, 2)               # slot 1 is at byte 64 of a 64-byte tensor
    assert "wait" in text and "symm tensor #0 (int32[16])" in text, text


def test_putmem_past_the_tensor_is_reported():
    text = _oob(put_past_the_tensor, 32)
    assert "putmem" in text and "(int32[16])" in text and "64 bytes" in text, text


def test_accesses_inside_the_tensor_and_masked_lanes_are_fine():
    res = triton_dist.launch(_bounds, masked_block_store, 0, world_size=1, timeout=120)
    assert res.values == [[0] * 16]                    # b untouched
    res = triton_dist.launch(_bounds, scalar_store_at, 15, world_size=1, timeout=120)
    assert res.values == [[0] * 16]


@triton.jit
def host_store_at(x, I: tl.constexpr):
    tl.store(x + I, 1.0)


def test_host_tensor_bounds():
    def body(i):
        x = torch.zeros(16, dtype=torch.float32)
        host_store_at[(1,)](x, I=i)
        return x.tolist()
    assert triton_dist.launch(body, 15, world_size=1, timeout=120).values[0][15] == 1.0
    with pytest.raises(triton_dist.RankError, match="tensor argument 'x'"):
        triton_dist.launch(body, 16, world_size=1, timeout=120)


@triton.jit
def store_by_raw_offset(a, DELTA: tl.constexpr):
    if dl.rank() == 0:
        tl.store(a + DELTA, 1)            # the same tensor on rank 1, reached without symm_at


def test_raw_pointer_arithmetic_into_a_peer_heap_is_reported():
    def body():
        from triton_dist.sim import context
        a = triton_dist.symm_tensor((16,), torch.int32)
        bases = context.runtime().heaps.bases
        store_by_raw_offset[(1,)](a, DELTA=(bases[1] - bases[0]) // 4)
        triton_dist.barrier()
        return a.tolist()
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=2, timeout=120)
    text = str(ei.value)
    assert "symm tensor #0 (int32[16]) of rank 0 is out of bounds" in text and "of rank 1" in text, text


@triton.jit
def signal_wait_until_past(a, b, I: tl.constexpr):
    shm.signal_wait_until(a + I, shm.ACLSHMEM_CMP_EQ, 0)


def test_signal_wait_until_past_the_tensor_is_reported():
    text = _oob(signal_wait_until_past, 16)
    assert "signal_wait_until" in text and "symm tensor #0 (int32[16])" in text, text
