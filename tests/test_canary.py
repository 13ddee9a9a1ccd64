"""Canary: the triton interpreter internals the simulator patches (sim/interp.py) are still
there, on whichever supported triton is installed (issue 22 item 4).

Each Triton API generation has an adapter in sim/tritonapi/, chosen by feature detection;
the entry points checked here are the live adapter's.  If triton is upgraded and these fail,
read sim/tritonapi/ before widening the `sim` extra's range.
"""
import importlib.metadata

import pytest
import torch
import triton
import triton.language as tl
from packaging.requirements import Requirement

import triton_dist
from triton_dist.sim import interp


def test_installed_triton_is_in_the_supported_range():
    # the sim extra (pyproject.toml) takes the stock lines with block pointers, 3.5-3.7; 3.8 and 3.9 stay
    # supported beside it (scripts/triton_venv.sh; triton_dist/requirements.py SUPPORTED_LINES)
    from triton_dist import requirements
    assert requirements.triton_problem() is None, requirements.triton_problem()
    wanted = [r for r in importlib.metadata.requires("triton_dist")
              if r.startswith("triton") and 'extra == "sim"' in r][0]
    spec = Requirement(wanted.split(";")[0]).specifier
    release = tuple(int(p) for p in triton.__version__.split(".")[:2])
    assert spec.contains(triton.__version__) or release in ((3, 8), (3, 9)), (
        f"triton {triton.__version__} is installed but the sim extra accepts {spec} and the lines beside it are "
        f"3.8 and 3.9; the simulator patches interpreter internals (sim/tritonapi/), check them before widening")


def test_an_adapter_fits_the_installed_triton():
    # the generation detected must be the one of the installed release (each adapter's own
    # detection; the lines as the adapters' docstrings date them)
    release = tuple(int(p) for p in triton.__version__.split(".")[:2])
    expected = {(3, 5): "3.5", (3, 6): "3.6/3.7", (3, 7): "3.6/3.7", (3, 8): "3.8/3.9", (3, 9): "3.8/3.9"}
    assert expected[release] in interp.API.line, (triton.__version__, interp.API.line)
    assert interp.API.missing() == []


def _id(x):
    # the same in every xdist worker: never an object's address
    return x if isinstance(x, str) else getattr(x, "__name__", type(x).__name__)


@pytest.mark.parametrize("owner,name", interp.REQUIRED, ids=_id)
def test_patched_entry_point_exists(owner, name):
    assert hasattr(owner, name), f"triton's interpreter lost {_id(owner)}.{name}; sim/tritonapi/ needs it"


def test_kernels_stay_jit_functions_and_the_simulator_interprets_them_per_launch():
    # issue 23: importing triton_dist does not switch the process to the interpreter (a cuda rank
    # forked from here compiles the same object); the simulator's launches interpret it
    from triton.runtime.jit import JITFunction
    assert type(pid_kernel) is JITFunction
    assert not triton.knobs.runtime.interpret
    assert hasattr(JITFunction.run, "__wrapped__") and hasattr(JITFunction.__call__, "__wrapped__")


@triton.jit
def pid_kernel(out, flags):
    pid = tl.program_id(0)
    tl.store(out + pid, pid * 10 + tl.num_programs(0))
    tl.store(flags + pid + tl.arange(0, 1), tl.full((1,), 1, tl.int32))


def test_program_ids_are_per_core():
    def body():
        out = torch.zeros(6, dtype=torch.int32)
        flags = torch.zeros(6, dtype=torch.int32)
        pid_kernel[(6,)](out, flags)
        return out.tolist(), flags.tolist()
    # coherent: under the ascend model six cores storing scalars into one 64-byte line
    # through write-back caches lose updates, as on the NPU (tests/test_device_model.py).
    res = triton_dist.launch(body, world_size=1, memory_model="coherent")
    assert res.values[0] == ([p * 10 + 6 for p in range(6)], [1] * 6)


@triton.jit
def stdlib_kernel(x, out, N: tl.constexpr):
    # triton's own @jit helpers must be interpreted too
    v = tl.load(x + tl.arange(0, N)) + tl.zeros((N,), tl.float32)
    tl.store(out, tl.sum(v, axis=0))
    tl.store(out + 1, tl.max(v, axis=0))
    tl.store(out + 2, tl.cdiv(tl.sum(v, axis=0).to(tl.int32), 3).to(tl.float32))
    tl.store(out + 3, tl.sum(tl.sigmoid(v) * 0, axis=0))


def test_triton_stdlib_helpers_are_interpreted():
    def body():
        x = torch.arange(8, dtype=torch.float32)
        out = torch.zeros(4)
        stdlib_kernel[(1,)](x, out, N=8)
        return out.tolist()
    assert triton_dist.launch(body, world_size=1, memory_model="coherent").values[0] == [28.0, 7.0, 10.0, 0.0]


@triton.jit
def bf16_dot_kernel(a, b, c, N: tl.constexpr):
    r = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(c + r, tl.dot(tl.load(a + r), tl.load(b + r)))


def test_bf16_dot_matches_torch():
    def body():
        g = torch.Generator().manual_seed(0)
        a = torch.randn(16, 16, generator=g).to(torch.bfloat16)
        b = torch.randn(16, 16, generator=g).to(torch.bfloat16)
        c = torch.zeros(16, 16)
        bf16_dot_kernel[(1,)](a, b, c, N=16)
        return torch.allclose(c, a.float() @ b.float(), atol=1e-3, rtol=1e-3)
    assert triton_dist.launch(body, world_size=1).values == [True]


@triton.jit
def helper_plus_one(x):
    return x + 1


@triton.jit
def helper_loop_kernel(out, n):
    acc = 0
    for i in range(0, n):            # range(tensor) while other cores call a @jit helper
        acc = helper_plus_one(acc)
    tl.store(out + tl.program_id(0) + tl.arange(0, 1), tl.full((1,), 0, tl.int32) + acc)


def test_jit_helpers_in_concurrent_cores():
    def body():
        out = torch.zeros(16, dtype=torch.int32)
        for _ in range(5):
            helper_loop_kernel[(16,)](out, 20)
        return out.tolist()
    assert triton_dist.launch(body, world_size=1).values == [[20] * 16]


def _lang_attrs():
    return (tl.core.program_id, tl.program_id, vars(tl.core.tensor).get("__index__"), tl.range, tl.core.dtype.to_ir,
            tl.reduce)


def _lang_attrs_and_methods():
    return _lang_attrs() + (vars(tl.core.tensor)["sum"], vars(tl.core.tensor)["cumsum"])


def test_triton_language_is_restored_after_a_launch():
    # a kernel traced for a device later in the process (the Ascend lowering, cuda) must meet
    # triton.language's own builtins again, on every generation (3.5 patches for good: the
    # adapter undoes it), and the tensor methods the launch bound as interpreted ones
    def body():
        before = _lang_attrs_and_methods()
        out, flags = torch.zeros(2, dtype=torch.int32), torch.zeros(2, dtype=torch.int32)
        pid_kernel[(2,)](out, flags)
        return [a is b for a, b in zip(before, _lang_attrs_and_methods())], out.tolist()
    same, out = triton_dist.launch(body, world_size=1, memory_model="coherent").values[0]
    assert out == [2, 12] and all(same), same
