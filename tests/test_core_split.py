"""sync_block_set / sync_block_wait as real synchronisation between a block's concurrent cube and
vector instances (issue 22 item 2; sim/core_split.py), and the unpaired-flag report at kernel
end (issue 26 item 5).

The pipeline is triton-ascend's flash-attention handoff (docs/zh/triton_api/Extension_Ops/
sync_block.md at triton-lang/triton-ascend a84b1eb5): per iteration the cube computes S = Q K^T
into a workspace and sets cube->vector 0; the vector waits, reads S, accumulates a softmax
numerator and sets vector->cube 1, which the cube waits for (in the source: before its set,
at the top of the next iteration) before it overwrites the workspace.  The oracle is torch.
Its twins: a cube that never sets (a deadlock naming the flag), a set nobody waits for (the
unpaired report), a cube that does not wait before overwriting (the race detector).
"""
import inspect

import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra.cann import extension as al

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm

M, D, ITERS, BLOCKS = 8, 16, 3, 2


@triton.jit
def cv_pipeline(q_ptr, k_ptr, ws_ptr, out_ptr, ITERS: tl.constexpr, M: tl.constexpr, D: tl.constexpr,
                WAIT_BEFORE_OVERWRITE: tl.constexpr, CUBE_SETS: tl.constexpr, LAST_WAIT: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + pid * M * D + rm[:, None] * D + rd[None, :])
    ws = ws_ptr + pid * M * M + rm[:, None] * M + rm[None, :]
    acc = tl.zeros((M, M), tl.float32)
    for i in range(ITERS):
        k = tl.load(k_ptr + i * M * D + rm[:, None] * D + rd[None, :])
        s = tl.dot(q, tl.trans(k))
        if WAIT_BEFORE_OVERWRITE:
            if i > 0:
                al.sync_block_wait("vector", "cube", 1)      # the vector has read the last S
        tl.store(ws, s)
        if CUBE_SETS:
            al.sync_block_set("cube", "vector", 0)
        al.sync_block_wait("cube", "vector", 0)
        x = tl.load(ws)
        acc += tl.exp(x - tl.max(x, 1)[:, None])
        if WAIT_BEFORE_OVERWRITE:
            al.sync_block_set("vector", "cube", 1)           # the cube may overwrite S
    if LAST_WAIT:
        al.sync_block_wait("vector", "cube", 1)
    tl.store(out_ptr + pid * M * M + rm[:, None] * M + rm[None, :], acc)


def _line(text):
    """The line of cv_pipeline's source holding `text` (the reports name kernel lines)."""
    lines, first = inspect.getsourcelines(cv_pipeline.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _inputs():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(BLOCKS * M, D, generator=g)
    k = torch.randn(ITERS * M, D, generator=g)
    return q, k


def _expected(q, k):
    out = torch.zeros(BLOCKS, M, M)
    for b in range(BLOCKS):
        for i in range(ITERS):
            s = q[b * M:(b + 1) * M] @ k[i * M:(i + 1) * M].T
            out[b] += torch.exp(s - s.max(dim=1, keepdim=True).values)
    return out


def _pipeline(wait_before_overwrite=True, cube_sets=True, last_wait=True):
    q, k = _inputs()
    ws = triton_dist.symm_tensor((BLOCKS * M * M,), torch.float32)
    out = torch.zeros(BLOCKS * M * M)
    cv_pipeline[(BLOCKS,)](q, k, ws, out, ITERS=ITERS, M=M, D=D, WAIT_BEFORE_OVERWRITE=wait_before_overwrite,
                           CUBE_SETS=cube_sets, LAST_WAIT=last_wait)
    return torch.allclose(out.view(BLOCKS, M, M), _expected(q, k), atol=1e-4)


def test_pipeline_gives_the_torch_result_on_the_free_schedule_and_the_race_check():
    assert triton_dist.launch(_pipeline, world_size=1, timeout=60).values == [True]
    assert triton_dist.launch(_pipeline, world_size=1, timeout=60, race_check=True).values == [True]


@pytest.mark.parametrize("schedule", ["pct", "random"])
def test_pipeline_gives_the_torch_result_under_seeds(schedule):
    for seed in range(4):
        res = triton_dist.launch(_pipeline, world_size=1, schedule=schedule, seed=seed, timeout=60)
        assert res.values == [True], (schedule, seed)


@pytest.mark.parametrize("schedule", ["free", "pct"])
def test_a_cube_that_never_sets_is_a_deadlock_naming_the_flag(schedule):
    with pytest.raises(triton_dist.DeadlockError) as e:
        triton_dist.launch(_pipeline, True, False, world_size=1, timeout=60, schedule=schedule, seed=0)
    msg = str(e.value)
    line = _line('al.sync_block_wait("cube", "vector", 0)')
    assert f"sync_block_wait('cube', 'vector', 0) at test_core_split.py:{line}" in msg, msg
    assert "flag cube->vector 0, vector core 0 of block (0, 0, 0) awaits 1, sees 0" in msg, msg


def test_a_set_nobody_waits_for_is_reported_at_kernel_end():
    with pytest.raises(triton_dist.RankError) as e:
        triton_dist.launch(_pipeline, True, True, False, world_size=1, timeout=60)
    msg = str(e.value)
    assert "unpaired sync_block_set at the end of the kernel: rank 0 core " in msg, msg
    assert "its cube core) ends with flags set and never waited for" in msg, msg
    line = _line('al.sync_block_set("vector", "cube", 1)')
    assert (f"sync_block_set('vector', 'cube', event_id=1) at test_core_split.py:{line} (cv_pipeline): set 1 time more "
            "than sync_block_wait('vector', 'cube', 1) waited (on the block's cube core)") in msg, msg
    assert "Fix: add the matching sync_block_wait('vector', 'cube', 1) on the cube side of this block" in msg, msg


def test_a_cube_that_overwrites_before_the_vector_read_races():
    res = triton_dist.launch(_pipeline, False, True, False, world_size=1, timeout=60, race_check="report")
    races = [str(r) for r in res.races]
    assert races, "the missing wait went unnoticed"
    store, load = f"test_core_split.py:{_line('tl.store(ws, s)')}", f"test_core_split.py:{_line('x = tl.load(ws)')}"
    assert any(store in r and load in r for r in races), races


@triton.jit
def cv_scoped(a_ptr, b_ptr, ws_ptr, out_ptr, ITERS: tl.constexpr, M: tl.constexpr, K: tl.constexpr,
              N: tl.constexpr):
    # the cube writes C_i + 1 (not a bare dot result: the scope makes it the cube's store), both
    # vector cores (sub_vec_id) wait for it, each takes half the rows, and the cube waits for both
    pid = tl.program_id(0)
    rm = tl.arange(0, M)
    rk = tl.arange(0, K)
    rn = tl.arange(0, N)
    for i in range(ITERS):
        with al.scope(core_mode="cube"):
            if i > 0:
                al.sync_block_wait("vector", "cube", 1)
            a = tl.load(a_ptr + ((pid * ITERS + i) * M + rm[:, None]) * K + rk[None, :])
            b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
            c = tl.dot(a, b)
            tl.store(ws_ptr + pid * M * N + rm[:, None] * N + rn[None, :], c + 1.0)
            al.sync_block_set("cube", "vector", 0)
        with al.scope(core_mode="vector"):
            al.sync_block_wait("cube", "vector", 0)
            rows = al.sub_vec_id() * (M // 2) + tl.arange(0, M // 2)
            x = tl.load(ws_ptr + pid * M * N + rows[:, None] * N + rn[None, :])
            tl.store(out_ptr + ((pid * ITERS + i) * M + rows[:, None]) * N + rn[None, :], tl.maximum(x, 0.0) * 2)
            al.sync_block_set("vector", "cube", 1)
    with al.scope(core_mode="cube"):
        al.sync_block_wait("vector", "cube", 1)


def _scoped():
    g = torch.Generator().manual_seed(1)
    K, N = 16, 8
    a = torch.randn(BLOCKS * ITERS * M, K, generator=g)
    b = torch.randn(K, N, generator=g)
    ws = triton_dist.symm_tensor((BLOCKS * M * N,), torch.float32)
    out = torch.zeros(BLOCKS * ITERS * M, N)
    cv_scoped[(BLOCKS,)](a, b, ws, out, ITERS=ITERS, M=M, K=K, N=N)
    return torch.allclose(out, torch.relu(a @ b + 1.0) * 2, atol=1e-4)


def test_scoped_pipeline_with_two_vector_cores_gives_the_torch_result():
    """A cube->vector set reaches both vector cores; the cube's wait needs a set from each."""
    assert triton_dist.launch(_scoped, world_size=1, timeout=60, race_check=True).values == [True]
    for schedule in ("pct", "random"):
        for seed in range(2):
            res = triton_dist.launch(_scoped, world_size=1, schedule=schedule, seed=seed, timeout=60)
            assert res.values == [True], (schedule, seed)


@triton.jit
def cv_distributed(a_ptr, b_ptr, ws_ptr, out_ptr, sig_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    # the cube's dot goes through the workspace to the vector core, which sends twice it to the
    # next rank and signals it there: the device library runs on the vector core only (a cube
    # instance adding to the signal too would leave 2 there and the wait for 1 would never end)
    rm = tl.arange(0, M)
    rk = tl.arange(0, K)
    rn = tl.arange(0, N)
    tile = rm[:, None] * N + rn[None, :]
    c = tl.dot(tl.load(a_ptr + rm[:, None] * K + rk[None, :]), tl.load(b_ptr + rk[:, None] * N + rn[None, :]))
    tl.store(ws_ptr + tile, c)
    al.sync_block_set("cube", "vector", 0)
    al.sync_block_wait("cube", "vector", 0)
    x = tl.load(ws_ptr + tile)
    peer = (dl.rank() + 1) % dl.num_ranks()
    tl.store(dl.symm_at(out_ptr, peer) + tile, x * 2)
    shm.fence()
    dl.notify(sig_ptr, peer, signal=1, sig_op="add")
    dl.wait(sig_ptr, 1, "sys", "acquire", waitValue=1)
    shm.barrier_all()


def _distributed():
    K, N = 16, 8
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(M, K, generator=g), torch.randn(K, N, generator=g)
    ws = triton_dist.symm_tensor((M * N,), torch.float32)
    out = triton_dist.symm_tensor((M * N,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    triton_dist.barrier()               # every rank's tensors exist before a peer writes them
    cv_distributed[(1,)](a, b, ws, out, sig, M=M, K=K, N=N)
    return torch.allclose(out.view(M, N), 2 * (a @ b), atol=1e-4), int(sig[0])


def test_the_device_library_runs_on_the_vector_core_of_a_split_block():
    assert triton_dist.launch(_distributed, world_size=2, timeout=60, race_check=True).values == [(True, 1)] * 2
    for seed in range(2):
        res = triton_dist.launch(_distributed, world_size=2, schedule="pct", seed=seed, timeout=60)
        assert res.values == [(True, 1)] * 2, seed


@triton.jit
def kind_barriers(ws_ptr, out_ptr):
    # each block's cube writes its id, the cubes meet (all_cube), the vectors meet (all_vector)
    # and every core meets (all); then each vector reads the other block's value
    pid = tl.program_id(0)
    one = tl.arange(0, 1)
    with al.scope(core_mode="cube"):
        tl.store(ws_ptr + pid + one, tl.full((1,), 1, tl.int32) + pid)
        al.sync_block_set("cube", "vector", 0)
        al.sync_block_all("all_cube", 0)
    al.sync_block_wait("cube", "vector", 0)
    al.sync_block_all("all_vector", 0)
    al.sync_block_all("all", 0)
    tl.store(out_ptr + pid + one, tl.load(ws_ptr + (1 - pid) + one))


def test_sync_block_all_modes_are_barriers_of_their_cores():
    def body():
        ws, out = triton_dist.symm_tensor((2,), torch.int32), torch.zeros(2, dtype=torch.int32)
        kind_barriers[(2,)](ws, out)
        return out.tolist()
    assert triton_dist.launch(body, world_size=1, timeout=60, race_check=True).values == [[2, 1]]
