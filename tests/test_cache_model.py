"""The default memory model follows triton-ascend's lowering (issue 15 section 2; the table in
docs/device_model.md says where each rule comes from).

Oracles: the evidence on the real toolchain (a scalar tl.store is a 1-element DMA of exactly
sizeof(T) bytes; a scalar tl.load goes through the non-coherent data cache), upstream's
test_my_pe expectations (elements 0..2 == rank), and hand-derived byte contents of host
memory around a tensor.
"""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl

SEEDS = range(12)


# ---- scalar stores are exact: upstream's test_my_pe ------------------------------------------

@triton.jit
def add_my_pe(ptr):
    pid = tl.program_id(0)
    x = tl.load(ptr + pid)                # three programs, three adjacent int64 of one line
    tl.store(ptr + pid, x + dl.rank())


def _my_pe():
    t = torch.zeros([32], dtype=torch.int64)         # a plain tensor, not symmetric
    add_my_pe[(3, 1, 1)](t)
    return t.tolist()


def _expected(rank):
    return [rank] * 3 + [0] * 29


@pytest.mark.parametrize("schedule", ["random", "pct"])
def test_my_pe_scalar_stores_in_one_line_are_exact(schedule):
    for seed in SEEDS:
        res = triton_dist.launch(_my_pe, world_size=2, schedule=schedule, seed=seed, timeout=30)
        assert res.values == [_expected(0), _expected(1)], f"seed {seed}"


def test_my_pe_free_schedule():
    res = triton_dist.launch(_my_pe, world_size=2, timeout=30)
    assert res.values == [_expected(0), _expected(1)]


def test_the_strict_model_keeps_scalar_stores_in_the_cache():
    """ascend-scalar-cache: whole-line write-back at kernel end, so the three programs can
    overwrite each other's element (the documented SetValue behaviour)."""
    lost = 0
    for seed in SEEDS:
        res = triton_dist.launch(_my_pe, world_size=2, schedule="random", seed=seed, timeout=30,
                                 memory_model="ascend-scalar-cache")
        lost += res.values[1] != _expected(1)
    assert lost > 0


@triton.jit
def one_scalar_store(ptr):
    tl.store(ptr + 1, 7)


def test_kernel_end_writes_back_dirty_lines():
    """ascend-scalar-cache: the store sits in the core's cache until the kernel ends; the
    host reads it after the launch (the kernel-end write-back, docs/device_model.md)."""
    def body():
        t = torch.zeros([16], dtype=torch.int32)
        one_scalar_store[(1,)](t)
        return t.tolist()
    res = triton_dist.launch(body, world_size=1, timeout=30, memory_model="ascend-scalar-cache")
    assert res.values[0] == [0, 7] + [0] * 14


def test_unknown_model_names_the_choices():
    with pytest.raises(triton_dist.TritonDistError, match="ascend-scalar-cache"):
        triton_dist.launch(_my_pe, world_size=1, memory_model="nope")


# ---- scalar loads go through the cache and can be stale -----------------------------------

@triton.jit
def spin_on_a_stored_flag(flag, out, USE_WAIT: tl.constexpr):
    if tl.program_id(0) == 1:
        x = tl.load(flag)                  # caches the flag's line (0) ...
        tl.store(out, 1)                   # ... then lets program 0 go
        if USE_WAIT:
            dl.wait(flag, 1, "sys", "acquire", waitValue=1)    # dcci + read every round
        else:
            while tl.load(flag) != 1:      # a plain scalar load: hits the stale line
                pass
        tl.store(out + 1, x + 1)
    else:
        while tl.atomic_add(out, 0) != 1:  # an atomic poll: bypasses the cache
            pass
        tl.store(flag, 1)                  # an exact store: reaches memory, not program 1's cache


def _stale(use_wait):
    flag = triton_dist.symm_tensor((16,), torch.int32)
    out = triton_dist.symm_tensor((16,), torch.int32)
    spin_on_a_stored_flag[(2,)](flag, out, USE_WAIT=use_wait)
    return out[1].item()


def test_a_plain_scalar_load_spin_stays_stale():
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_stale, False, world_size=1, timeout=120)
    assert "core 1" in str(ei.value), str(ei.value)


def test_dl_wait_sees_the_exact_store():
    assert triton_dist.launch(_stale, True, world_size=1, timeout=30).values == [1]


def test_coherent_model_has_no_stale_loads():
    assert triton_dist.launch(_stale, False, world_size=1, timeout=30, memory_model="coherent").values == [1]


# ---- issue 14 item 7: a write-back never writes bytes it does not own ------------------------

@triton.jit
def scalar_then_block(x, y):
    tl.store(x, 5)                          # strict model: caches the line around x (dirty)
    offs = tl.arange(0, 4)
    tl.store(y + offs, offs + 10)           # a DMA into the bytes just before x, in that line


def _neighbours(model):
    arr = np.zeros(32, dtype=np.int32)
    base = arr.ctypes.data
    k = (-base // 4) % 16                   # the first element of arr on a 64-byte boundary
    y = torch.from_numpy(arr[k:k + 4])      # its own storage: 16 bytes
    x = torch.from_numpy(arr[k + 4:k + 5])  # its own storage: 4 bytes, same 64-byte line
    scalar_then_block[(1,)](x, y)
    return arr[k:k + 8].tolist()


@pytest.mark.parametrize("model", ["ascend", "ascend-scalar-cache"])
def test_write_back_never_reverts_a_neighbouring_buffer(model):
    res = triton_dist.launch(_neighbours, model, world_size=1, timeout=30, memory_model=model)
    assert res.values[0] == [10, 11, 12, 13, 5, 0, 0, 0]
