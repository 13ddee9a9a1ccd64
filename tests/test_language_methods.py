"""Tensor methods as users write them (`x.sum()`, `x.max(axis=0)`, `x.cumsum(0)`, ...) run in
kernels on the simulator, with the results numpy/torch give (issue 14 item 14).

Triton defines a family of `tl.tensor` methods as @jit helpers (standard.py's reductions,
scans, flip, softmax, ...).  The list is taken from triton.language itself, so a method a
new Triton adds fails here until it has an oracle below.
"""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

import triton_dist

R, C = 4, 8


def jit_tensor_methods():
    """Every tl.tensor method that Triton defines as a @jit helper (not a builtin): the
    attributes of tl.tensor named after a @jit helper of triton.language.  By name, because
    what the class attribute holds depends on when it is looked at (the helper itself, the
    simulator's interpreted method, or the wrapper Triton's interpreter puts there during a
    launch).  Type stubs in the class body (`tensor.sort`: no member function behind it,
    in Triton either) are not methods."""
    return sorted(n for n, v in vars(tl.tensor).items()
                  if n in _HELPER_NAMES and getattr(v, "__qualname__", "") != f"tensor.{n}")


# the names of triton.language's @jit helpers, from its modules (before or after the simulator
# made them interpreted), to recognise the method wrappers that forward to them
_HELPER_NAMES = {n for mod in (tl, tl.standard, tl.core, tl.math) for n, v in vars(mod).items()
                 if isinstance(v, (JITFunction, InterpretedFunction))}


# method -> (kernel body on the [R, C] block `x` (float32) or `xi` (int32), oracle on numpy arrays)
# Each body yields a tensor; the kernel stores it flattened.
CASES = {
    "sum": ("x.sum(axis=1)", lambda x, xi: x.sum(axis=1)),
    "max": ("x.max(axis=0)", lambda x, xi: x.max(axis=0)),
    "min": ("x.min(axis=1)", lambda x, xi: x.min(axis=1)),
    "argmax": ("x.argmax(axis=1)", lambda x, xi: x.argmax(axis=1)),
    "argmin": ("x.argmin(axis=0)", lambda x, xi: x.argmin(axis=0)),
    "xor_sum": ("xi.xor_sum(axis=1)", lambda x, xi: np.bitwise_xor.reduce(xi, axis=1)),
    "reduce_or": ("xi.reduce_or(axis=0)", lambda x, xi: np.bitwise_or.reduce(xi, axis=0)),
    "cumsum": ("x.cumsum(1)", lambda x, xi: np.cumsum(x, axis=1)),
    "cumprod": ("x.cumprod(0)", lambda x, xi: np.cumprod(x, axis=0)),
    "flip": ("x.flip(1)", lambda x, xi: x[:, ::-1]),
    "ravel": ("x.ravel()", lambda x, xi: x.ravel()),
    "cdiv": ("xi.cdiv(3)", lambda x, xi: -(-xi // 3)),
    "sigmoid": ("x.sigmoid()", lambda x, xi: torch.sigmoid(torch.from_numpy(x)).numpy()),
    "softmax": ("x.softmax(1, keep_dims=True)", lambda x, xi: torch.softmax(torch.from_numpy(x), dim=1).numpy()),
}


def test_every_jit_tensor_method_has_a_case():
    missing = set(jit_tensor_methods()) - set(CASES)
    assert not missing, f"tl.tensor methods defined as @jit helpers with no test case: {sorted(missing)}"
    assert {"sum", "max", "min", "argmax", "cumsum", "flip"} <= set(jit_tensor_methods())


def _make_kernel(body: str, tmp_path):
    # A kernel per method, written to a file: @triton.jit needs the source of the function.
    src = (
        "import triton, triton.language as tl\n"
        "@triton.jit\n"
        "def method_kernel(xp, xip, out, R: tl.constexpr, C: tl.constexpr, N: tl.constexpr):\n"
        "    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]\n"
        "    x = tl.load(xp + offs)\n"
        "    xi = tl.load(xip + offs)\n"
        f"    y = {body}\n"
        "    tl.store(out + tl.arange(0, N), tl.reshape(y, (N,)).to(tl.float32))\n")
    path = tmp_path / "method_kernel.py"
    path.write_text(src)
    ns = {}
    exec(compile(src, str(path), "exec"), ns)  # noqa: S102 - our own generated test kernel
    return ns["method_kernel"]


def _inputs():
    g = np.random.default_rng(7)
    x = g.uniform(0.5, 1.5, size=(R, C)).astype(np.float32)
    x[1, 3] = 3.0          # a unique max/min per row and column keeps argmax/argmin unambiguous
    x[2, 5] = 0.1
    xi = g.integers(0, 1 << 12, size=(R, C)).astype(np.int32)
    return x, xi


def _run_all(kernels):
    x, xi = _inputs()
    out = {}
    for name, (kern, n) in kernels.items():
        o = torch.zeros(n, dtype=torch.float32)
        kern[(1,)](torch.from_numpy(x), torch.from_numpy(xi), o, R=R, C=C, N=n)
        out[name] = o.numpy()
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_tensor_method_in_a_kernel(name, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    body, oracle = CASES[name]
    x, xi = _inputs()
    want = np.asarray(oracle(x, xi), dtype=np.float32).ravel()
    kern = _make_kernel(body, tmp_path)
    got = triton_dist.launch(_run_all, {name: (kern, want.size)}, world_size=1, backend="sim").values[0][name]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"x.{name}: {body}")
