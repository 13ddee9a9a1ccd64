"""sub_vec_id() and the vector sub-cores of a mix kernel (issue 15 §1; evidence C): a kernel
with tl.dot that calls sub_vec_id runs each block on 2 vector sub-cores, both running all
vector code with the block's program_id, sub_vec_id 0 and 1; a kernel without tl.dot runs one
instance per block, sub_vec_id 0 (inferred); a mix kernel that never names sub_vec_id keeps
the compiler's split of vector work (one instance's worth of effects)."""
import torch
import triton
import triton.language as tl
from triton.language.extra.cann.extension import sub_vec_id, sub_vec_num

import triton_dist


@triton.jit
def mix_kernel(x, out, who):
    pid = tl.program_id(0)
    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    tl.store(out + pid * 256 + offs, tl.dot(tl.load(x + offs), tl.load(x + offs)))
    tl.atomic_add(who + pid * 2 + sub_vec_id(), 1)
    tl.atomic_add(who + 8, tl.num_programs(0))


@triton.jit
def mix_without_sub_vec(x, out, who):
    pid = tl.program_id(0)
    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    tl.store(out + pid * 256 + offs, tl.dot(tl.load(x + offs), tl.load(x + offs)))
    tl.atomic_add(who + pid * 2, 1)


@triton.jit
def vector_kernel(who):
    tl.atomic_add(who + tl.program_id(0) * 2 + sub_vec_id(), sub_vec_num())


def _run():
    x = 2 * torch.eye(16)
    res = {}
    for name, k in (("mix", mix_kernel), ("mix_plain", mix_without_sub_vec)):
        out, who = torch.zeros(3 * 256), torch.zeros(9, dtype=torch.int32)
        k[(3,)](x, out, who)
        res[name] = (who.tolist(), bool(torch.equal(out.view(3, 16, 16), (4 * torch.eye(16)).expand(3, 16, 16))))
    who = torch.zeros(9, dtype=torch.int32)
    vector_kernel[(3,)](who)
    res["vector"] = who.tolist()
    return res


def test_sub_vector_cores_of_mix_and_vector_kernels():
    res = triton_dist.launch(_run, world_size=1, backend="sim").values[0]
    # mix + sub_vec_id: blocks 0..2 each ran on sub-cores 0 and 1; num_programs is the grid (3) in all 6
    assert res["mix"] == ([1, 1, 1, 1, 1, 1, 0, 0, 18], True)
    assert res["mix_plain"] == ([1, 0, 1, 0, 1, 0, 0, 0, 0], True)
    assert res["vector"] == [2, 0, 2, 0, 2, 0, 0, 0, 0]


@triton.jit
def _mix_store(x, sym, same: tl.constexpr):
    # the block's dot result stored outside any sub_vec_id guard (as upstream's GEMM tutorials
    # do): on the NPU the cube stores it once; here both sub-core instances run the store
    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    acc = tl.dot(tl.load(x + offs), tl.load(x + offs))
    if same:
        tl.store(sym + offs, acc)
    else:
        tl.store(sym + offs, acc + sub_vec_id())      # the two vector cores write different bytes
    if sub_vec_id() == 0:
        tl.store(sym + 256 + offs, acc)


def _mix_store_launch(same):
    x = 2 * torch.eye(16)
    sym = triton_dist.symm_tensor((512,), torch.float32)
    _mix_store[(1,)](x, sym, same)
    return bool(torch.equal(sym[:256].view(16, 16), 4 * torch.eye(16)))


def test_the_cube_store_modelled_on_both_sub_cores_is_no_race():
    # identical bytes from the two sub-core instances of one block at one line: the cube's one
    # store, not two unordered writes (before: a race on a correct kernel)
    res = triton_dist.launch(_mix_store_launch, True, world_size=1, race_check="report")
    assert res.values == [True] and res.races == []


def test_sub_cores_writing_different_bytes_still_race():
    # vector code both sub-cores run, writing different values to one place: a real race
    res = triton_dist.launch(_mix_store_launch, False, world_size=1, race_check="report")
    assert len(res.races) == 1 and "cores 0 and 1" in str(res.races[0])
