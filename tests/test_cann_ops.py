"""triton-ascend's data ops of triton.language.extra.cann.extension on stock triton (issue 22
item 3): each runs in a kernel on the simulator and is checked against numpy, with the
examples of triton-ascend's own docstrings (mem_ops.py at triton-lang/triton-ascend a84b1eb5:
gather_out_to_ub -> [[1, 4], [5, 8]], scatter_ub_to_out -> [[0, 4], [1, 0], [0, 2], [3, 0]],
index_put -> [[3, 4], [0, 0], [1, 2], [0, 0]]) as fixed points; traced for the NPU, each is
refused by the Ascend lowering with a message naming it.
"""
import re

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra.cann import extension as al

import triton_dist
from triton_dist.backend_ascend.frontend import build_ttir


def _run(body):
    return triton_dist.launch(body, world_size=1, memory_model="coherent").values[0]


@triton.jit
def slices_kernel(x, out, e_out):
    r = tl.arange(0, 8)[:, None] * 8 + tl.arange(0, 8)[None, :]
    v = tl.load(x + r)
    sub = al.extract_slice(v, (2, 1), (4, 2), (1, 3))           # rows 2..5, columns 1 and 4
    zero = tl.zeros((8, 8), tl.float32)
    ins = al.insert_slice(zero, sub * 10, (2, 1), (4, 2), (1, 3))
    tl.store(out + r, ins)
    s = tl.arange(0, 4)[:, None] * 2 + tl.arange(0, 2)[None, :]
    tl.store(e_out + s, sub)
    tl.store(e_out + 8, al.get_element(v, (5, 6)))


def test_extract_insert_slice_and_get_element_match_numpy():
    x = np.arange(64, dtype=np.float32).reshape(8, 8)

    def body():
        out, e = torch.zeros(64), torch.zeros(9)
        slices_kernel[(1,)](torch.from_numpy(x.copy()), out, e)
        return out.numpy().reshape(8, 8), e.numpy()
    out, e = _run(body)
    want = np.zeros((8, 8), np.float32)
    want[2:6, 1:7:3] = x[2:6, 1:7:3] * 10
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(e[:8].reshape(4, 2), x[2:6, 1:7:3])
    assert e[8] == x[5, 6]


@triton.jit
def sort_flip_kernel(x, out, N: tl.constexpr):
    r = tl.arange(0, 4)[:, None] * N + tl.arange(0, N)[None, :]
    v = tl.load(x + r)
    tl.store(out + r, al.sort(v, -1, False))
    tl.store(out + 4 * N + r, al.sort(v, 1, descending=True))
    tl.store(out + 8 * N + r, al.flip(v, 0))
    tl.store(out + 12 * N + r, al.flip(v))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16])
def test_sort_and_flip_match_numpy(dtype):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4, 8, generator=g) * 50).to(dtype)

    def body():
        out = torch.zeros(16 * 8, dtype=dtype)
        sort_flip_kernel[(1,)](x.clone(), out, N=8)
        return out.view(4, 4, 8).numpy()
    out = _run(body)
    xn = x.numpy()
    np.testing.assert_array_equal(out[0], np.sort(xn, axis=-1))
    np.testing.assert_array_equal(out[1], np.sort(xn, axis=-1)[:, ::-1])
    np.testing.assert_array_equal(out[2], xn[::-1, :])
    np.testing.assert_array_equal(out[3], xn[:, ::-1])


@triton.jit
def gather_kernel(src, index, out, N: tl.constexpr, DIM: tl.constexpr, R0: tl.constexpr, C0: tl.constexpr):
    r = tl.arange(0, 2)[:, None] * N + tl.arange(0, N)[None, :]
    idx = tl.load(index + r)
    g = al.gather_out_to_ub(src, idx, 4, DIM, (N, 1), (2, N), (R0, C0), other=-1.0)
    tl.store(out + r, g)


def _gather_ref(src, idx, dim, start, boundary, other):
    out = np.empty(idx.shape, src.dtype)
    for i, j in np.ndindex(*idx.shape):
        if idx[i, j] >= boundary:
            out[i, j] = other
            continue
        c = [start[0] + i, start[1] + j]
        c[dim] = start[dim] + idx[i, j]
        out[i, j] = src[tuple(c)]
    return out


def test_gather_out_to_ub_matches_the_docstring_and_numpy():
    def body(src, idx, n, dim, start):
        out = torch.zeros(idx.shape)
        gather_kernel[(1,)](src, idx, out, N=n, DIM=dim, R0=start[0], C0=start[1])
        return out.numpy()
    src = torch.tensor([[1., 2.], [3., 4.], [5., 6.], [7., 8.]])
    idx = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    assert _run(lambda: body(src, idx, 2, 0, (0, 0))).tolist() == [[1., 4.], [5., 8.]]
    g = torch.Generator().manual_seed(0)
    big = torch.randn(8, 8, generator=g)
    for dim, start in ((0, (1, 0)), (1, (3, 0))):
        ix = torch.randint(0, 6, (2, 8), generator=g, dtype=torch.int32)      # 4, 5 are past index_boundary 4
        got = _run(lambda: body(big, ix, 8, dim, start))
        np.testing.assert_array_equal(got, _gather_ref(big.numpy(), ix.numpy(), dim, start, 4, -1.0))


@triton.jit
def scatter_kernel(value, index, dst):
    r = tl.arange(0, 2)[:, None] * 2 + tl.arange(0, 2)[None, :]
    al.scatter_ub_to_out(dst, tl.load(value + r), tl.load(index + r), 4, 0, (2, 1), (2, 2), (0, 0))


@triton.jit
def index_put_kernel(value, index, dst, V: tl.constexpr, S1: tl.constexpr):
    i = tl.arange(0, 2)
    v = tl.load(value + i[:, None] * V + tl.arange(0, V)[None, :])
    al.index_put(dst, tl.load(index + i), v, 0, 4, (2, S1 + V), (0, S1), (4, 1))


def test_scatter_ub_to_out_and_index_put_match_the_docstrings_and_numpy():
    def scatter():
        dst = torch.zeros(4, 2)
        scatter_kernel[(1,)](torch.tensor([[1., 2.], [3., 4.]]), torch.tensor([[1, 2], [3, 0]], dtype=torch.int32),
                             dst)
        return dst.tolist()
    assert _run(scatter) == [[0., 4.], [1., 0.], [0., 2.], [3., 0.]]

    def put(index, v, s1):
        dst = torch.zeros(4, 4)
        index_put_kernel[(1,)](v, torch.tensor(index, dtype=torch.int32), dst, V=v.shape[1], S1=s1)
        return dst.numpy()
    v = torch.tensor([[1., 2.], [3., 4.]])
    assert _run(lambda: put([2, 0], v, 0))[:, :2].tolist() == [[3., 4.], [0., 0.], [1., 2.], [0., 0.]]
    got = _run(lambda: put([3, 7], v, 2))               # 7 >= index_boundary 4: that row is skipped
    want = np.zeros((4, 4), np.float32)
    want[3, 2:4] = [1., 2.]
    np.testing.assert_array_equal(got, want)


@triton.jit
def index_select_kernel(src, index, out):
    idx = tl.load(index + tl.arange(0, 4))
    t = al.index_select_simd(src, 1, idx, [2, 6, 8], [1, -1, 4], [1, -1, 4])      # shape (1, 4, 4)
    r = tl.arange(0, 4)[:, None] * 4 + tl.arange(0, 4)[None, :]
    tl.store(out + r, tl.reshape(t, (4, 4)))


def test_index_select_simd_matches_numpy():
    src = torch.arange(2 * 6 * 8, dtype=torch.float32).view(2, 6, 8)
    idx = torch.tensor([5, 0, 3, 3], dtype=torch.int32)

    def body():
        out = torch.zeros(16)
        index_select_kernel[(1,)](src, idx, out)
        return out.view(4, 4).numpy()
    np.testing.assert_array_equal(_run(body), src.numpy()[1, [5, 0, 3, 3], 4:8])


def test_out_of_bounds_gather_is_caught_by_the_pointer_bounds_check():
    # a stride that walks off the tensor: the memory model's provenance check names it
    def body():
        src, idx, out = torch.zeros(4, 2), torch.tensor([[0, 1], [2, 3]], dtype=torch.int32), torch.zeros(2, 2)
        gather_kernel[(1,)](src, idx, out, N=2, DIM=0, R0=3, C0=0)     # rows 3..6 of a 4-row tensor
    with pytest.raises(triton_dist.RankError, match="outside|past|beyond|out of"):
        triton_dist.launch(body, world_size=1)


@pytest.mark.parametrize("kernel,sig,consts,op", [
    (slices_kernel, {"x": "*fp32", "out": "*fp32", "e_out": "*fp32"}, {}, "extract_slice"),
    (sort_flip_kernel, {"x": "*fp32", "out": "*fp32"}, {"N": 8}, "sort"),
    (index_select_kernel, {"src": "*fp32", "index": "*i32", "out": "*fp32"}, {}, "index_select_simd"),
])
def test_the_ascend_lowering_gives_them_in_triton_ascends_form(kernel, sig, consts, op):
    # they were refused ("not supported by triton_dist's Ascend lowering"); now each becomes the op
    # triton-ascend's frontend emits (backend_ascend/extension_ops.py; compiled by the real tools in
    # tests/test_npu_compile_extension.py)
    from triton_dist.backend_ascend import extension_ops, hivm
    module, _ = build_ttir(kernel, sig, consts)
    text, _ = hivm.convert_text(module.str_nodebug())
    assert extension_ops.FORMS[op].ttir + " " in text and "triton_dist.ascend_ext" not in text


@triton.jit
def flag_kernel(out, SET: tl.constexpr):
    if SET:
        al.sync_block_set("cube", "vector", 3)
    al.sync_block_wait("cube", "vector", 3)
    tl.store(out + tl.program_id(0) + tl.arange(0, 1), tl.full((1,), 1, tl.int32))


def test_sync_block_wait_after_its_set_passes_and_without_it_is_reported():
    def body(set_first):
        out = torch.zeros(4, dtype=torch.int32)
        flag_kernel[(4,)](out, SET=set_first)
        return out.tolist()
    assert triton_dist.launch(body, True, world_size=1).values == [[1, 1, 1, 1]]
    with pytest.raises(triton_dist.RankError, match="rank 0 raised TritonDistError") as e:
        triton_dist.launch(body, False, world_size=1, timeout=60)
    msg = str(e.value)
    assert re.search(r"deadlock: rank 0 block \(\d, 0, 0\) vector core 0 at test_cann_ops.py:\d+ \(flag_kernel\)", msg), msg
    assert "sync_block_wait('cube', 'vector', 3) awaits 1 set of flag cube->vector 3, sees 0" in msg, msg
    assert "test_cann_ops.py" in msg and "put the matching sync_block_set('cube', 'vector', 3) on the cube side" in msg, msg


@triton.jit
def barrier_kernel(slots, out):
    pid = tl.program_id(0)
    one = tl.arange(0, 1)
    tl.store(slots + pid + one, tl.full((1,), 1, tl.int32) + pid)
    al.sync_block_all("all", 0)
    other = (pid + 1) % tl.num_programs(0)
    tl.store(out + pid + one, tl.load(slots + other + one))


def test_sync_block_all_is_a_barrier_of_the_launchs_cores():
    def body():
        slots, out = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
        barrier_kernel[(4,)](slots, out)
        return out.tolist()
    # every core reads its neighbour's slot after the barrier: all written, under any schedule
    for seed in range(3):
        res = triton_dist.launch(body, world_size=1, schedule="pct", seed=seed, memory_model="coherent")
        assert res.values == [[2, 3, 4, 1]]
