"""pytest plugin: run each test's body inside one simulated rank (triton_dist.launch).

Used by benchmarks/triton_test_core.py to run Triton's own test_core.py on the simulator:
every test function is called in a rank process started by `triton_dist.launch(world_size=1)`,
so its kernels go through the simulator (cores as threads, the access path, the memory model),
exactly as a kernel in a user's rank does.  Fixtures are set up in the pytest process and
inherited by the forked rank.  pytest.skip / pytest.xfail raised in the rank are raised again
here, so the outcome pytest records is the one the test had in the rank.

Options (pytest command line): --in-rank-timeout SECONDS (default 900),
--in-rank-memory-model NAME (default: the launcher's).
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption("--in-rank-timeout", type=float, default=900.0)
    parser.addoption("--in-rank-memory-model", default=None)


def pytest_configure(config):
    import triton_dist        # noqa: F401  (installs the simulator before test modules define kernels)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    import triton_dist
    fn = pyfuncitem.obj
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}

    def body():
        try:
            fn(**args)
        except pytest.skip.Exception as e:
            return ("skip", str(e))
        except pytest.xfail.Exception as e:
            return ("xfail", str(e))
        return ("ok", "")

    opts = {}
    mm = pyfuncitem.config.getoption("--in-rank-memory-model")
    if mm:
        opts["memory_model"] = mm
    timeout = pyfuncitem.config.getoption("--in-rank-timeout")
    try:
        kind, text = triton_dist.launch(body, world_size=1, timeout=timeout, **opts).values[0]
    except triton_dist.RankError as e:
        raise AssertionError(f"in the simulated rank: {e.exc_type}: {e.message}\n{e.traceback}") from None
    if kind == "skip":
        pytest.skip(text)
    if kind == "xfail":
        pytest.xfail(text)
    return True
