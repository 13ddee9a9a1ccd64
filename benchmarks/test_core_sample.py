"""pytest plugin: keep the first K collected cases of each test function (--sample-per-function K).

Used by benchmarks/triton_test_core.py so that the plain and the simulator run take the very
same cases: test_core.py collects ~9300 cases (~7400 of them marked `interpreter`), far too
many to run each inside a simulated rank on a 2-core machine; the first K parametrizations of
every test function (collection order, which is the source order of the parameter lists)
cover every function with a few dtypes/shapes each.  It imports nothing of triton_dist, so the
plain run stays the outside oracle.  K = 0 keeps everything.
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption("--sample-per-function", type=int, default=0,
                     help="keep the first K cases of each test function (0: all)")


@pytest.hookimpl(trylast=True)        # after -m interpreter has deselected its cases
def pytest_collection_modifyitems(config, items):
    k = config.getoption("--sample-per-function")
    if k <= 0:
        return
    seen: dict = {}
    keep, drop = [], []
    for item in items:
        fn = item.nodeid.split("[", 1)[0]
        seen[fn] = seen.get(fn, 0) + 1
        (keep if seen[fn] <= k else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
