"""pytest plugin of triton_dist (registered as a pytest11 entry point).

Options:
  --backend sim,npu,cuda backends for the `backend` fixture (default: every available one);
                         a backend that cannot run in this session is skipped with the reason
                         (npu: no NPU; cuda: no NVIDIA GPU, or the session interprets kernels)
  --sim-schedule S       default schedule of triton_dist.launch (free, random, pct)
  --sim-seed N           default seed (first seed with --sim-seeds)
  --sim-seeds K          run each test that launches ranks under K seeds
  --sim-race-check       turn the race detector on for every launch
Marker: @pytest.mark.backend("npu") runs a test only where that backend is selected and
available.  A failing test prints one line that replays it exactly.

Which backend kernels are built for is fixed per process (TRITON_DIST_BACKEND, see
triton_dist.backend.resolve): the simulator interprets them, cuda compiles them.  So the
sim variants run in a simulator session (the default: conftest.py sets
TRITON_DIST_BACKEND=sim) and the cuda variants in a session started with
TRITON_DIST_BACKEND=cuda, where every test that does not take the `backend` fixture is
skipped as simulator-only:

    TRITON_DIST_BACKEND=cuda python -m pytest --backend cuda tests/

`need_ranks(backend, n)` skips a test that needs more GPUs than the machine has.

Under pytest-xdist every worker forks its own ranks; launch() heaps are anonymous shared
memory (nothing named in /dev/shm), so workers cannot collide and nothing is left behind.
"""
from __future__ import annotations

import os
import shlex

import pytest

def _backends() -> list:
    from triton_dist import registry
    return registry.backend_names()


def _default_backend() -> str:
    from triton_dist import registry
    return registry.DEFAULT_BACKEND


def _session_backend():
    """The backend this process builds kernels for (triton_dist.backend.resolve()), or None
    where TRITON_DIST_BACKEND names none that this version of triton_dist accepts."""
    from triton_dist import backend
    try:
        return backend.resolve()
    except Exception:  # noqa: BLE001 - an unknown backend is not this one
        return None


def _available(name: str):
    """None if the backend can run in this pytest process, else the reason it cannot.

    Which backend kernels are built for is fixed per process: a backend's tests run only in
    a session of that backend, and only where its class reports nothing missing."""
    from triton_dist import registry
    from triton_dist.errors import TritonDistError
    try:
        cls = registry.backend_class(name)
        need = cls.missing()
    except TritonDistError as e:
        return f"backend {name!r} cannot be loaded: {e}"
    if need:
        return f"backend {name!r} needs {', '.join(need)}"
    which = _session_backend()
    if which == name:
        return None
    env = os.environ.get("TRITON_DIST_BACKEND", "auto")
    if name == _default_backend():
        return (f"this session compiles kernels for {which or env!r} (TRITON_DIST_BACKEND={env}); "
                f"run the simulator tests in another session")
    if which == _default_backend():
        return (f"kernels in this session are interpreted by the simulator; run the {name} tests in a "
                f"session started with TRITON_DIST_BACKEND={name}")
    return (f"this session compiles kernels for {which or env!r} (TRITON_DIST_BACKEND={env}); run the "
            f"{name} tests in a session started with TRITON_DIST_BACKEND={name}")


def need_ranks(backend: str, n: int) -> None:
    """Skip the calling test when `backend` cannot run n ranks on this machine (cuda: one GPU
    per rank); the simulator runs any number."""
    from triton_dist import registry
    why = registry.backend_class(backend).ranks_fit(n)
    if why:
        pytest.skip(why)


def pytest_addoption(parser):
    g = parser.getgroup("triton_dist", "triton_dist simulator and backends")
    g.addoption("--backend", default=None, metavar="LIST",
                help="comma list of backends to run the `backend` fixture on (registered ones: sim, "
                     "npu, cuda, ...); default: every available one")
    g.addoption("--sim-schedule", default=None, choices=["free", "random", "pct"],
                help="schedule triton_dist.launch uses when a test passes none")
    g.addoption("--sim-seed", type=int, default=None, help="seed for random/pct schedules")
    g.addoption("--sim-seeds", type=int, default=1, metavar="K",
                help="run each test that launches ranks under K seeds (from --sim-seed, default 0)")
    g.addoption("--sim-race-check", action="store_true", default=False,
                help="check every launch for unordered conflicting accesses")


def _selected(config):
    raw = config.getoption("--backend")
    if raw is None:
        return [b for b in _backends() if _available(b) is None] or [_default_backend()]
    names = [b.strip() for b in raw.split(",") if b.strip()]
    bad = [b for b in names if b not in _backends()]
    if bad:
        raise pytest.UsageError(f"--backend: unknown backend(s) {', '.join(bad)}; choose from "
                                f"{', '.join(_backends())}")
    return names


def pytest_configure(config):
    config.addinivalue_line("markers", "backend(name): the test needs this backend (sim, npu or cuda)")
    _selected(config)                 # a bad --backend is a usage error before collection
    from triton_dist import launcher
    config._triton_dist_saved = dict(launcher.DEFAULTS)
    schedule = config.getoption("--sim-schedule")
    if config.getoption("--sim-seeds") < 1:
        raise pytest.UsageError("--sim-seeds must be at least 1")
    if config.getoption("--sim-seeds") > 1 and schedule in (None, "free"):
        raise pytest.UsageError("--sim-seeds needs --sim-schedule random or pct")
    if schedule is not None:
        launcher.DEFAULTS["schedule"] = schedule
    if config.getoption("--sim-seed") is not None:
        launcher.DEFAULTS["seed"] = config.getoption("--sim-seed")
    if config.getoption("--sim-race-check"):
        launcher.DEFAULTS["race_check"] = True


def pytest_unconfigure(config):
    saved = getattr(config, "_triton_dist_saved", None)
    if saved is not None:
        from triton_dist import launcher
        launcher.DEFAULTS.clear()
        launcher.DEFAULTS.update(saved)


def pytest_collection_modifyitems(config, items):
    """In a session of another backend than the default (the simulator), only the tests
    that take the `backend` fixture (or are marked for that backend) run: everything else
    asserts what the simulator does."""
    which = _session_backend()
    if which is None or which == _default_backend():
        return
    skip = pytest.mark.skip(reason=f"simulator-only test: this session compiles kernels for {which.upper()} "
                                   f"(TRITON_DIST_BACKEND={which})")
    for item in items:
        if "backend" in getattr(item, "fixturenames", ()):
            continue
        if any(which in mark.args for mark in item.iter_markers("backend")):
            continue
        item.add_marker(skip)


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", _selected(metafunc.config), indirect=True)


@pytest.fixture
def backend(request):
    """The name of the backend this test runs on; skipped where it is not available."""
    name = request.param
    why = _available(name)
    if why:
        pytest.skip(why)
    return name


def pytest_runtest_setup(item):
    for mark in item.iter_markers("backend"):
        for name in mark.args:
            if name not in _selected(item.config):
                pytest.skip(f"backend {name!r} is not selected (--backend)")
            why = _available(name)
            if why:
                pytest.skip(why)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """With --sim-seeds K, call the test once per seed; stop at the first failing seed."""
    k = pyfuncitem.config.getoption("--sim-seeds")
    if k <= 1:
        return None
    from triton_dist import launcher
    first = pyfuncitem.config.getoption("--sim-seed") or 0
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    saved = launcher.DEFAULTS["seed"]
    try:
        for seed in range(first, first + k):
            launcher.DEFAULTS["seed"] = seed
            before = launcher.LAUNCHES[0]
            pyfuncitem._triton_dist_seed = seed
            pyfuncitem.obj(**args)
            if launcher.LAUNCHES[0] == before:
                break                     # the test launches no ranks: one run says it all
    finally:
        launcher.DEFAULTS["seed"] = saved
    return True


def replay_line(item) -> str:
    """The pytest command that reruns this test exactly as it failed."""
    from triton_dist import launcher
    last = launcher.LAST_LAUNCH
    parts = ["pytest", shlex.quote(item.nodeid)]
    schedule = last.get("schedule") or launcher.DEFAULTS.get("schedule") or "free"
    parts += ["--sim-schedule", schedule]
    seed = getattr(item, "_triton_dist_seed", None)
    if seed is None:
        seed = last.get("seed")
    if seed is not None:
        parts += ["--sim-seed", str(seed)]
    if item.config.getoption("--sim-race-check"):
        parts.append("--sim-race-check")
    return " ".join(parts)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        from triton_dist import launcher
        if launcher.LAST_LAUNCH:
            line = replay_line(item)
            note = "" if launcher.LAST_LAUNCH.get("schedule") != "free" else \
                "  (the free schedule is not reproducible: add --sim-schedule pct --sim-seeds 50 to search)"
            rep.sections.append(("triton_dist replay", line + note))


@pytest.fixture(autouse=True)
def _triton_dist_forget_last_launch():
    """Each test's replay line describes that test's own launches."""
    from triton_dist import launcher
    launcher.LAST_LAUNCH.clear()
    yield
