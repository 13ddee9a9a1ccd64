"""The simulator on triton-ascend's main line (issue 22 item 2), on the test doubles of
tests/doubles/triton_ascend_main/ laid over stock 3.5.1 (scripts/triton_ascend_double.sh makes
.venv-triton-ascend-double; scripts/test.sh runs this file there).  Elsewhere it skips.

What is checked: the real extension module's builtins (here: the doubles with its names,
signatures and builder calls) reach the simulator's models, not the AscendInterpreterBuilder's
sequential re-run and no-ops.  Each test is one the builder's own behaviour would fail: the two
sub-core instances of a block wait for each other (a second run of the grid afterwards would
never end); a barrier that not every core reaches is a deadlock report, a flag wait with no
set is reported (no-ops would pass both); the builder's memory ops raise if reached (the simulator's serve them,
checked against triton-ascend's docstring example).  Not verified: anything of triton-ascend
beyond those names, signatures and builder calls (the doubles' README).
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
from triton_dist.sim import interp

pytestmark = pytest.mark.skipif(
    "triton-ascend" not in interp.API.line,
    reason=f"needs triton-ascend's main line (this triton is {interp.API.line}); run under "
           f".venv-triton-ascend-double (scripts/triton_ascend_double.sh)")

if "triton-ascend" in interp.API.line:
    import triton.language.extra.cann.extension as al
else:
    al = None


def test_the_real_extension_module_is_used():
    from triton.runtime import interpreter
    assert al.__file__.startswith(os.path.dirname(triton.__file__)), al.__file__
    assert type(interpreter.interpreter_builder).__name__ == "AscendInterpreterBuilder"


@triton.jit
def handshake_kernel(x, flag, out):
    # a mix kernel (tl.dot) naming sub_vec_id: its block runs on two vector sub-cores at once.
    # Sub-core 0 waits for sub-core 1's flag; run one after the other, 0 would wait forever.
    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    acc = tl.dot(tl.load(x + offs), tl.load(x + offs))
    if al.sub_vec_id() == 1:
        tl.atomic_add(flag, 1)
    else:
        while tl.atomic_add(flag, 0) == 0:
            pass
        tl.store(out + offs, acc)


def test_sub_vec_id_answers_for_the_two_concurrent_sub_core_instances():
    def body():
        x, flag, out = 2 * torch.eye(16), torch.zeros(1, dtype=torch.int32), torch.zeros(256)
        handshake_kernel[(1,)](x, flag, out)
        return flag.item(), bool(torch.equal(out.view(16, 16), 4 * torch.eye(16)))
    assert triton_dist.launch(body, world_size=1, timeout=60).values == [(1, True)]


@triton.jit
def partial_barrier_kernel(out):
    pid = tl.program_id(0)
    if pid != 0:
        al.sync_block_all("all", 0)          # core 0 never arrives
    tl.store(out + pid + tl.arange(0, 1), tl.full((1,), 1, tl.int32))


def test_sync_block_all_is_a_barrier_whose_deadlock_is_reported():
    def body():
        partial_barrier_kernel[(3,)](torch.zeros(3, dtype=torch.int32))
    with pytest.raises(triton_dist.DeadlockError, match="local core barrier"):
        triton_dist.launch(body, world_size=1, timeout=120)


@triton.jit
def wait_without_set_kernel(out):
    al.sync_block_wait("cube", "vector", 5)
    tl.store(out + tl.arange(0, 1), tl.full((1,), 1, tl.int32))


def test_sync_block_wait_without_its_set_is_reported():
    def body():
        wait_without_set_kernel[(1,)](torch.zeros(1, dtype=torch.int32))
    with pytest.raises(triton_dist.RankError, match=r"TritonDistError: deadlock: .*sync_block_wait\('cube', 'vector', 5\) awaits 1 set"):
        triton_dist.launch(body, world_size=1, timeout=120)


@triton.jit
def ops_kernel(src, index, out, sl):
    y = tl.arange(0, 2)[:, None]
    x = tl.arange(0, 2)[None, :]
    g = al.gather_out_to_ub(src=src, index=tl.load(index + y * 2 + x), index_boundary=4, dim=0, src_stride=(2, 1),
                            end_offset=(2, 2), start_offset=(0, 0))
    tl.store(out + y * 2 + x, g)
    r = tl.arange(0, 4)[:, None] * 2 + tl.arange(0, 2)[None, :]
    v = tl.load(src + r)
    tl.store(sl + tl.arange(0, 2)[:, None] * 2 + x, al.extract_slice(v, (1, 0), (2, 2), (2, 1)))


def test_data_ops_through_the_real_frontend():
    src = torch.tensor([[1., 2.], [3., 4.], [5., 6.], [7., 8.]])

    def body():
        out, sl = torch.zeros(2, 2), torch.zeros(2, 2)
        ops_kernel[(1,)](src, torch.tensor([[0, 1], [2, 3]], dtype=torch.int32), out, sl)
        return out.tolist(), sl.numpy()
    gathered, sliced = triton_dist.launch(body, world_size=1, memory_model="coherent").values[0]
    assert gathered == [[1., 4.], [5., 8.]]                   # triton-ascend's docstring example
    np.testing.assert_array_equal(sliced, src.numpy()[1:4:2, :])


def test_the_extension_is_restored_after_a_launch():
    def body():
        before = (al.sub_vec_id, al.sync_block_all, al.scope, al.parallel, tl.reduce)
        wait_free = torch.zeros(256)
        handshake_kernel[(1,)](2 * torch.eye(16), torch.ones(1, dtype=torch.int32), wait_free)
        return [a is b for a, b in zip(before, (al.sub_vec_id, al.sync_block_all, al.scope, al.parallel, tl.reduce))]
    assert all(triton_dist.launch(body, world_size=1).values[0])


def test_import_triton_dist_works_for_the_npu_backend_too():
    env = dict(os.environ, TRITON_DIST_BACKEND="npu")
    r = subprocess.run([sys.executable, "-c", "import triton_dist; from triton_dist import backend; "
                        "print(backend.resolve())"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "npu", r.stdout + r.stderr
