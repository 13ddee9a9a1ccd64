"""pytest plugin of triton_dist (registered as a pytest11 entry point, as the top-level
`triton_dist_pytest`: loading it must not import triton_dist, see below).

It changes nothing for a suite that does not use triton_dist: nothing is imported until a
test takes the `backend` fixture or marker, or the test's own code imports triton_dist (a
plain Triton test under TRITON_INTERPRET=1 runs on Triton's interpreter as without the
plugin).  Where triton_dist cannot run (its triton is not supported, ...), the options are
still registered, pytest's header says why once, the tests using its fixture or marker skip
with that reason and every other test runs.

Options:
  --backend sim,npu,cuda backends for the `backend` fixture (default: every available one);
                         a backend that cannot run here is skipped with the reason
                         (npu: no NPU; cuda: no NVIDIA GPU)
  --compare-backends A,B run each test that takes the `backend` fixture on A, then on B, and
                         compare what its launches returned (triton_dist.testing): the first
                         difference fails the test with rank, index and both values
  --sim-schedule S       default schedule of triton_dist.launch (free, random, pct)
  --sim-seed N           default seed (first seed with --sim-seeds)
  --sim-seeds K          run each test that launches ranks under K seeds
  --sim-seed-shard I/N   of those seeds, only the s with s mod N == I (one CI job of N); the
                         first failing seed of each test goes to --sim-seed-results (default
                         .triton_dist/seed-shards/pytest-shard-I-of-N.json), and
                         `triton-dist explore-merge FILES...` joins the shards
  --sim-race-check       turn the race detector on for every launch
  --sim-memory-model M   default memory model of triton_dist.launch (ascend, ascend-scalar-cache,
                         ascend-weak-atomics, coherent)
  --npu-compile          also compile every kernel the simulator launches with the real NPU
                         compilers (docs/ascend.md); a refusal fails the test that launched it,
                         and the session ends with one line: accepted, refused, skipped
  --npu-compile-sources PATHS
                         only the kernels defined under these files/directories (comma list)
  --npu-lint             the session summary lists, per kernel launched, its performance cliffs on
                         the NPU (grid against the cores, scalar fallbacks, padded tail axes), each
                         with its fix (backend_ascend/lint.py); a report, never a failure
Markers: @pytest.mark.backend("npu") runs a test only where that backend is selected and
available; @pytest.mark.backend_specific("why") says what the test's launches return differs
between backends by design (--compare-backends runs both variants, compares nothing).  A
failing test prints one line that replays it exactly.

The kernel mode is chosen per launch (issue 23): the same @triton.jit kernel runs
interpreted in the simulator's ranks and compiled in cuda/npu ranks, so one session runs
every variant: `pytest --backend sim,cuda` on a GPU machine runs both.
TRITON_DIST_BACKEND only chooses the backend launch() uses when a test names none (the
default, sim, is what conftest.py sets): in a session started with another one, the tests
that use triton_dist without taking the `backend` fixture are skipped, since they assert what
the simulator does.

`need_ranks(backend, n)` skips a test that needs more GPUs than the machine has.

Under pytest-xdist every worker forks its own ranks; launch() heaps are anonymous shared
memory (nothing named in /dev/shm), so workers cannot collide and nothing is left behind.
"""
from __future__ import annotations

import importlib.util
import os
import shlex
import sys

import pytest

# The plugin is loaded (pytest11) by every pytest session of an environment where triton_dist
# is installed, most of which have nothing to do with it: a plain Triton test under
# TRITON_INTERPRET=1 must not find the simulator's interpreter installed.  So nothing here
# imports triton_dist until a test uses it: its `backend` fixture or marker (then the plugin
# imports it), or the test's own import of triton_dist (then the plugin applies its options to
# what is already loaded).  Where triton_dist cannot run, those tests skip saying why, and the
# rest run.
_state: dict = {}


def _probe() -> str | None:
    """Why triton_dist cannot be imported here, found from files alone (its requirements check,
    triton_dist/requirements.py, loaded by path without importing the package); None if nothing
    is known to be wrong."""
    if "probe" not in _state:
        _state["probe"] = _read_requirements()
    return _state["probe"]


def _read_requirements() -> str | None:
    try:
        spec = importlib.util.find_spec("triton_dist")      # finds, does not import
    except (ImportError, ValueError) as e:
        return f"triton_dist cannot be found: {e}"
    if spec is None or not spec.submodule_search_locations:
        return "triton_dist is not installed as a package"
    path = os.path.join(list(spec.submodule_search_locations)[0], "requirements.py")
    try:
        rspec = importlib.util.spec_from_file_location("_triton_dist_requirements_probe", path)
        mod = importlib.util.module_from_spec(rspec)
        rspec.loader.exec_module(mod)
        missing = mod.problems()
    except Exception as e:  # noqa: BLE001 - the probe must never break pytest
        return f"triton_dist's requirements cannot be checked ({type(e).__name__}: {e})"
    return f"triton_dist needs {'; '.join(missing)}" if missing else None


def _activate() -> str | None:
    """Import triton_dist (a test uses it); None when it is usable, else why not (once)."""
    if "active" not in _state:
        why = _probe()
        if why is None:
            try:
                import triton_dist  # noqa: F401
            except Exception as e:  # noqa: BLE001 - reported in the skip reason instead
                why = f"import triton_dist failed: {type(e).__name__}: {e}"
        _state["active"] = why
    return _state["active"]


def _loaded() -> bool:
    """Has something in this session imported triton_dist (a conftest, a test module)?"""
    return "triton_dist.launcher" in sys.modules


def _registered_backends() -> list:
    """Backend names from the installed entry points, without importing triton_dist (empty
    when its metadata is not there: a source tree on PYTHONPATH)."""
    from importlib import metadata
    try:
        return [ep.name for ep in metadata.entry_points(group="triton_dist.backends")]
    except Exception:  # noqa: BLE001
        return []


def _backends() -> list:
    from triton_dist import registry
    return registry.backend_names()


def _default_backend() -> str:
    from triton_dist import registry
    return registry.DEFAULT_BACKEND


def _session_backend():
    """The backend launch() uses in this process when none is named (triton_dist.backend.resolve()),
    or None where TRITON_DIST_BACKEND names none that this version of triton_dist accepts."""
    from triton_dist import backend
    try:
        return backend.resolve()
    except Exception:  # noqa: BLE001 - an unknown backend is not this one
        return None


def _available(name: str):
    """None if the backend can run in this pytest process, else the reason it cannot (what its
    class reports missing on this machine)."""
    why = _activate()
    if why:
        return why
    from triton_dist import registry
    from triton_dist.errors import TritonDistError
    try:
        cls = registry.backend_class(name)
        need = cls.missing()
    except TritonDistError as e:
        return f"backend {name!r} cannot be loaded: {e}"
    if need:
        return f"backend {name!r} needs {', '.join(need)}"
    return None


def _by_default(name: str) -> bool:
    """Whether the `backend` fixture takes this backend when --backend names none: a backend class
    with `tested_by_default = False` (hivm: the simulator again, with compiled kernels that the
    3.2.0 compilers refuse in places) runs only where asked for, --backend sim,hivm."""
    from triton_dist import registry
    try:
        return bool(getattr(registry.backend_class(name), "tested_by_default", True))
    except Exception:  # noqa: BLE001 - _available reports a backend that cannot be loaded
        return True


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
    g.addoption("--compare-backends", default=None, metavar="A,B",
                help="run each test that takes the `backend` fixture on backend A, then B, and compare the values "
                     "its launches returned (tensors with per-dtype tolerances, exact for integers and the "
                     "bit-identical collectives); e.g. sim,cuda")
    g.addoption("--sim-schedule", default=None, choices=["free", "random", "pct", "aware", "explore"],
                help="schedule triton_dist.launch uses when a test passes none")
    g.addoption("--sim-seed", type=int, default=None, help="seed for random/pct schedules")
    g.addoption("--sim-seeds", type=int, default=1, metavar="K",
                help="run each test that launches ranks under K seeds (from --sim-seed, default 0)")
    g.addoption("--sim-seed-shard", default=None, metavar="I/N",
                help="with --sim-seeds: try only the seeds s with s mod N == I (shard I of N, one machine of a CI "
                     "matrix) and write each test's first failing seed to --sim-seed-results; "
                     "`triton-dist explore-merge FILES...` prints the union (triton_dist/seed_shards.py)")
    g.addoption("--sim-seed-results", default=None, metavar="FILE.json",
                help="with --sim-seed-shard: where this shard's results go (default "
                     ".triton_dist/seed-shards/pytest-shard-I-of-N.json)")
    g.addoption("--sim-race-check", action="store_true", default=False,
                help="check every launch for unordered conflicting accesses")
    g.addoption("--sim-memory-model", default=None, metavar="MODEL",
                help="memory model triton_dist.launch uses when a test passes none: ascend (the default), "
                     "ascend-scalar-cache, ascend-weak-atomics or coherent (launch checks the name; the "
                     "plugin imports nothing of the simulator before a test uses it)")
    g.addoption("--npu-compile", action="store_true", default=False,
                help="also compile every kernel launched on the simulator with the real NPU compilers "
                     "(triton-ascend's triton-adapter-opt, AscendNPU-IR's bishengir-compile; cached on disk); a "
                     "kernel they refuse fails its test")
    g.addoption("--npu-compile-targets", default=None, metavar="T,T...",
                help="with --npu-compile: compile each launch for each of these chips (--target values of the "
                     "installed bishengir-compile; `triton-dist npu-compile --target list` lists them); "
                     "default Ascend910B4")
    g.addoption("--npu-compile-sources", default=None, metavar="PATHS",
                help="with --npu-compile: only kernels defined under these files or directories (comma list, "
                     "e.g. triton_dist/kernels,examples)")
    g.addoption("--npu-lint", action="store_true", default=False,
                help="list in the session summary, per kernel launched, its performance cliffs on the NPU (grid "
                     "against the cores, int64 scalar fallbacks, tail axes padded to 32/512 bytes, scalar loops of "
                     "the compiled module), each with its fix; a report, never a failure")


def _requested(config) -> list | None:
    raw = config.getoption("--backend")
    return None if raw is None else [b.strip() for b in raw.split(",") if b.strip()]


def _check_requested(names, known) -> None:
    bad = [b for b in names if b not in known]
    if bad:
        raise pytest.UsageError(f"--backend: unknown backend(s) {', '.join(bad)}; choose from "
                                f"{', '.join(known)}")


def _compared(config) -> tuple | None:
    """The pair of --compare-backends, or None."""
    raw = config.getoption("--compare-backends")
    if raw is None:
        return None
    return tuple(b.strip() for b in raw.split(",") if b.strip())


def _selected(config):
    pair = _compared(config)
    if pair is not None:                # one item per test, running both (pytest_pyfunc_call)
        return [pair]
    names = _requested(config)
    if _activate():                  # triton_dist cannot run: its tests skip, saying why
        return names or ["sim"]
    if names is None:
        return [b for b in _backends() if _available(b) is None and _by_default(b)] or [_default_backend()]
    _check_requested(names, _backends())
    return names


def pytest_configure(config):
    config.addinivalue_line("markers", "backend(name): the test needs this backend (sim, npu or cuda)")
    config.addinivalue_line("markers", "compare_tolerance(rtol=None, atol=None): the tolerances --compare-backends "
                            "uses for this test (a number, or a dict keyed by dtype name; triton_dist.testing)")
    config.addinivalue_line("markers", "backend_specific(reason): what the test's launches return differs between "
                                       "backends by design (a device name, a launch configuration); "
                                       "--compare-backends runs both variants and compares nothing")
    names = _requested(config)
    if names is not None:       # asking for backends is using triton_dist: a bad name is a usage error now
        known = _backends() if _activate() is None else _registered_backends()
        if known:
            _check_requested(names, known)
    pair = _compared(config)
    if pair is not None:
        if len(pair) != 2 or pair[0] == pair[1]:
            raise pytest.UsageError(f"--compare-backends needs two different backends, e.g. sim,cuda; got "
                                    f"{config.getoption('--compare-backends')!r}")
        if names is not None:
            raise pytest.UsageError("--compare-backends runs each test on both of its backends; leave --backend out")
        if config.getoption("--sim-seeds") > 1:
            raise pytest.UsageError("--compare-backends and --sim-seeds do not combine; run them in two sessions")
        known = _backends() if _activate() is None else _registered_backends()
        if known:
            _check_requested(list(pair), known)
    if config.getoption("--sim-seeds") < 1:
        raise pytest.UsageError("--sim-seeds must be at least 1")
    _check_shard(config)
    _check_seeds(config)
    if config.getoption("--sim-seeds") > 1 and config.getoption("--sim-schedule") in (None, "free"):
        raise pytest.UsageError(
            "--sim-seeds runs each test under that many deterministic schedules, and the free schedule "
            f"({'the default' if config.getoption('--sim-schedule') is None else 'chosen'}) is not one: add "
            "--sim-schedule explore (the best at finding bugs per seed), or aware, random or pct")
    if config.getoption("--npu-compile"):
        _npu_compile_configure(config)
    elif config.getoption("--npu-compile-sources"):
        raise pytest.UsageError("--npu-compile-sources needs --npu-compile")
    elif config.getoption("--npu-compile-targets"):
        raise pytest.UsageError("--npu-compile-targets needs --npu-compile")
    if config.getoption("--npu-lint"):
        _npu_lint_configure(config)


def _apply_options(config) -> None:
    """Once triton_dist is loaded: the session's defaults of triton_dist.launch."""
    if getattr(config, "_triton_dist_saved", None) is not None or not _loaded():
        return
    from triton_dist import launcher
    config._triton_dist_saved = dict(launcher.DEFAULTS)
    schedule = config.getoption("--sim-schedule")
    if schedule is not None:
        launcher.DEFAULTS["schedule"] = schedule
    if config.getoption("--sim-seed") is not None:
        launcher.DEFAULTS["seed"] = config.getoption("--sim-seed")
    if config.getoption("--sim-race-check"):
        launcher.DEFAULTS["race_check"] = True
    if config.getoption("--sim-memory-model") is not None:
        launcher.DEFAULTS["memory_model"] = config.getoption("--sim-memory-model")
    config._triton_dist_saved_hint = dict(launcher.FAILURE_HINT)


def pytest_report_header(config):
    why = _probe()
    extra = _npu_compile_header(config)
    if why:
        return [f"triton_dist: cannot run here, its tests skip: {why}"] + extra
    if not _loaded():
        return ["triton_dist: not imported (activated by the first test that uses it)"] + extra
    line = sys.modules.get("triton_dist.sim.interp")
    api = getattr(getattr(line, "API", None), "line", None)
    return [f"triton_dist: active{f' on {api}' if api else ''}"] + extra


def pytest_unconfigure(config):
    _restore_check_env(config)            # --npu-compile's and --npu-lint's environment and logs
    saved = getattr(config, "_triton_dist_saved", None)
    if saved is not None:
        from triton_dist import launcher
        launcher.DEFAULTS.clear()
        launcher.DEFAULTS.update(saved)
        launcher.FAILURE_HINT.clear()
        launcher.FAILURE_HINT.update(config._triton_dist_saved_hint)


def _uses_our_backend_fixture(item_or_metafunc) -> bool:
    """The test takes this plugin's `backend` fixture (not another plugin's or conftest's of that name)."""
    if "backend" not in getattr(item_or_metafunc, "fixturenames", ()):
        return False
    info = getattr(item_or_metafunc, "_arg2fixturedefs", None)
    if info is None:
        info = getattr(getattr(item_or_metafunc, "_fixtureinfo", None), "name2fixturedefs", {})
    defs = info.get("backend") or ()
    return bool(defs) and getattr(getattr(defs[-1], "func", None), "__module__", None) == __name__


def _module_uses_triton_dist(item) -> bool:
    module = getattr(item, "module", None)
    for value in vars(module).values() if module is not None else ():
        name = value.__name__ if isinstance(value, type(sys)) else getattr(value, "__module__", None)
        if isinstance(name, str) and (name == "triton_dist" or name.startswith("triton_dist.")):
            return True
    return False


def pytest_collection_modifyitems(config, items):
    """In a session whose launch() defaults to another backend than the simulator
    (TRITON_DIST_BACKEND=cuda), only the tests that take the `backend` fixture (or are marked
    for that backend) run of those that use triton_dist: the others launch on the default
    backend and assert what the simulator does.  Tests that do not use triton_dist are left
    alone."""
    if not _loaded():
        return
    which = _session_backend()
    if which is None or which == _default_backend():
        return
    skip = pytest.mark.skip(reason=f"simulator-only test: launch() in this session defaults to backend {which!r} "
                                   f"(TRITON_DIST_BACKEND={which}); the `backend` fixture's tests run every "
                                   f"variant, sim included")
    for item in items:
        if _uses_our_backend_fixture(item):
            continue
        if any(which in mark.args for mark in item.iter_markers("backend")):
            continue
        if _module_uses_triton_dist(item):
            item.add_marker(skip)


def pytest_generate_tests(metafunc):
    if _uses_our_backend_fixture(metafunc):
        metafunc.parametrize("backend", _selected(metafunc.config), indirect=True,
                             ids=lambda p: "-vs-".join(p) if isinstance(p, tuple) else str(p))


@pytest.fixture
def backend(request):
    """The name of the backend this test runs on; skipped where it is not available.  Under
    --compare-backends A,B the test runs on A, then on B (pytest_pyfunc_call)."""
    names = request.param if isinstance(request.param, tuple) else (request.param,)
    for name in names:
        why = _available(name)
        if why:
            _skip_at_test(why if len(names) == 1 else f"cannot compare {' and '.join(names)}: {why}")
    return names[0]


def _skip_at_test(why: str):
    """Skip the running test, reported at the test's own line as a skipif marker's skip is (a plain
    pytest.skip here was reported at this plugin's line, which tells the user nothing)."""
    try:
        raise pytest.skip.Exception(why, _use_item_location=True)
    except TypeError:          # a pytest without item locations for skips (before 7.0)
        pytest.skip(why)


def pytest_runtest_setup(item):
    _apply_options(item.config)
    if _loaded():           # what a failure under the free schedule suggests: this test's commands
        from triton_dist import launcher
        node = shlex.quote(item.nodeid)
        launcher.FAILURE_HINT["free"] = (
            f"this run used the free schedule, which does not replay: reproduce it under a deterministic "
            f"schedule with `pytest {node} --sim-schedule explore --sim-seeds 50{_model_option(item)}` and check "
            f"it for races with `pytest {node} --sim-race-check{_model_option(item)}`")
    for mark in item.iter_markers("backend"):
        why = _activate()
        if why:
            _skip_at_test(why)
        for name in mark.args:
            if name not in _selected(item.config):
                _skip_at_test(f"backend {name!r} is not selected (--backend)")
            why = _available(name)
            if why:
                _skip_at_test(why)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """With --compare-backends, run the test on both backends and compare; with --sim-seeds K,
    call the test once per seed and stop at the first failing seed."""
    pair = _compared(pyfuncitem.config)
    if pair is not None and _uses_our_backend_fixture(pyfuncitem):
        return _run_compared(pyfuncitem, pair)
    k = pyfuncitem.config.getoption("--sim-seeds")
    shard = getattr(pyfuncitem.config, "_triton_dist_shard", None)
    if (k <= 1 and shard is None) or not _loaded():
        return None
    from triton_dist import launcher, seed_shards
    first = pyfuncitem.config.getoption("--sim-seed") or 0
    todo = seed_shards.seeds(first, k, shard)
    if not todo:
        pytest.skip(f"none of the seeds {first}-{first + k - 1} is in shard {shard[0]}/{shard[1]}")
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    saved = launcher.DEFAULTS["seed"]
    try:
        for seed in todo:
            if seed != todo[0]:           # each seed runs as its replay line would: fresh fixtures
                args = _fresh_function_fixtures(pyfuncitem)
            launcher.DEFAULTS["seed"] = seed
            before = launcher.LAUNCHES[0]
            pyfuncitem._triton_dist_seed = seed
            pyfuncitem.obj(**args)
            if launcher.LAUNCHES[0] == before:
                break                     # the test launches no ranks: one run says it all
    finally:
        launcher.DEFAULTS["seed"] = saved
    return True


def _run_compared(item, pair) -> bool:
    """The test body on each backend of `pair` (fresh fixtures for the second), the values of
    its launches recorded; then launch i of one compared with launch i of the other."""
    from triton_dist import launcher, testing
    tol = _compare_tolerance(item)          # before anything runs: a typo there would be ignored
    args = {name: item.funcargs[name] for name in item._fixtureinfo.argnames}
    runs = {}
    for i, name in enumerate(pair):
        if i:
            args = _fresh_function_fixtures(item)
        args["backend"] = name
        item.funcargs["backend"] = name
        with launcher.recording() as launches:
            item.obj(**args)
        runs[name] = launches
    if item.get_closest_marker("backend_specific") is not None:
        return True                     # both variants ran and passed their own checks
    a, b = (runs[n] for n in pair)
    if not a:
        pytest.skip(f"nothing to compare: the test launched nothing on {pair[0]!r} that returned")
    if len(a) != len(b):
        raise testing.BackendsDisagree(f"backends {pair[0]!r} and {pair[1]!r} disagree: the test finished "
                                       f"{len(a)} launches on {pair[0]!r} and {len(b)} on {pair[1]!r}")
    for i, ((_, ra), (_, rb)) in enumerate(zip(a, b)):
        what = f" in launch {i + 1} of {len(a)} of the test" if len(a) > 1 else ""
        testing.check_values(ra.values, rb.values, pair, what=what, rtol=tol.get("rtol"), atol=tol.get("atol"))
    item._triton_dist_compared = len(a)
    return True


def _check_seeds(config) -> None:
    """--sim-seed, and the last seed --sim-seeds reaches, in the range every schedule takes
    (triton_dist/seeds.py), refused at the start rather than in every test."""
    first = config.getoption("--sim-seed")
    if first is None:
        return
    from triton_dist.seeds import seed_problem
    last = first + config.getoption("--sim-seeds") - 1
    for option, seed in (("--sim-seed", first), ("--sim-seed + --sim-seeds - 1", last)):
        why = seed_problem(seed)
        if why is not None:
            raise pytest.UsageError(f"{option} {why}")


def _compare_tolerance(item) -> dict:
    """The test's compare_tolerance marker as {rtol, atol}: other arguments, keys that name no
    floating dtype and negative tolerances refused (testing.check_tolerances)."""
    from triton_dist import testing
    from triton_dist.errors import TritonDistError
    marker = item.get_closest_marker("compare_tolerance")
    if marker is None:
        return {}
    tol = dict(marker.kwargs)
    unknown = [repr(a) for a in marker.args] + sorted(set(tol) - {"rtol", "atol"})
    if unknown:
        raise TritonDistError(f"{item.nodeid}: compare_tolerance takes rtol= and atol= only (a number, or a dict "
                              f"keyed by floating dtype), got {', '.join(unknown)}")
    testing.check_tolerances(tol.get("rtol"), tol.get("atol"), f"{item.nodeid}: compare_tolerance")
    return tol


def _fresh_function_fixtures(item) -> dict:
    """Tear down the test's function-scoped fixtures (last set up, first torn down) and set
    them up again, as pytest does between two tests; wider scopes stay.  Returns the test's
    arguments.  (pytest has no public call for this; FixtureDef.finish and _fillfixtures are
    what its own setup and teardown run.)"""
    request = item._request
    defs = [fd for fd in request._fixture_defs.values() if fd.scope == "function"]
    # what the setup phase left in the item's stash (tmp_path's teardown deletes the record of
    # the phases it reads, which its next teardown needs again): put back after teardown
    kept = dict(getattr(item.stash, "_storage", {}))
    for fd in reversed(defs):
        fd.finish(request)
    for key, value in kept.items():
        item.stash.setdefault(key, value)
    for fd in defs:
        request._fixture_defs.pop(fd.argname, None)
        item.funcargs.pop(fd.argname, None)
    request._fillfixtures()
    return {name: item.funcargs[name] for name in item._fixtureinfo.argnames}


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
    return _env() + " ".join(parts) + _model_option(item)


def _model_option(item) -> str:
    """The session's --sim-memory-model, as an option of a command line ('' if not set)."""
    model = item.config.getoption("--sim-memory-model")
    return f" --sim-memory-model {model}" if model else ""


def _env() -> str:
    """The environment variables that change what a launch does, as a shell prefix."""
    from triton_dist import launcher
    return launcher.execution_env()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed and _loaded():
        from triton_dist import launcher
        exc = call.excinfo.value if call.excinfo is not None else None
        kind = getattr(exc, "exc_type", None) or type(exc).__name__
        if launcher.LAST_LAUNCH and kind not in launcher.SCHEDULE_INDEPENDENT_FAILURES:
            line = replay_line(item)
            note = "" if launcher.LAST_LAUNCH.get("schedule") != "free" else \
                ("  (the free schedule is not reproducible: add --sim-schedule explore --sim-seeds 50 to search, "
                 "--sim-race-check to check it for races)")
            rep.sections.append(("triton_dist replay", line + note))
            seed = getattr(item, "_triton_dist_seed", None)
            why = (getattr(exc, "evidence", None) or [""])[0]
            if why.startswith("["):         # the device model's diagnosis, for the session's summary by kind
                rep.user_properties.append((_DIAGNOSIS_PROPERTY, {"seed": seed, "finding": why}))
            if getattr(item.config, "_triton_dist_shard", None) is not None and seed is not None:
                crash = getattr(getattr(rep, "longrepr", None), "reprcrash", None)
                message = (getattr(crash, "message", "") or "failed").splitlines()[0]
                # user_properties travel from pytest-xdist's workers to the controller, which writes the file
                rep.user_properties.append((_SHARD_PROPERTY, {"seed": seed, "count": 1, "message": message,
                                                              "replay": line}))


# --- --sim-seed-shard ---------------------------------------------------------------------------------
_SHARD_PROPERTY = "triton_dist_seed_shard_failure"


def _check_shard(config) -> None:
    raw = config.getoption("--sim-seed-shard")
    config._triton_dist_shard = None
    if raw is None:
        if config.getoption("--sim-seed-results") is not None:
            raise pytest.UsageError("--sim-seed-results names the file of a shard: give --sim-seed-shard I/N with it")
        return
    why = _activate()               # sharding seeds is using the simulator: import triton_dist now
    if why:
        raise pytest.UsageError(f"--sim-seed-shard: {why}")
    from triton_dist import seed_shards
    try:
        config._triton_dist_shard = seed_shards.parse(raw)
    except seed_shards.ShardError as e:
        raise pytest.UsageError(f"--sim-seed-shard: {e}") from None
    if config.getoption("--sim-schedule") in (None, "free"):
        raise pytest.UsageError("--sim-seed-shard splits the seeds of a deterministic schedule: add --sim-schedule "
                                "explore (or aware, random, pct) and --sim-seeds K")
    config._triton_dist_shard_runs = {"tried": 0, "failures": {}}


_DIAGNOSIS_PROPERTY = "triton_dist_diagnosis"


def pytest_runtest_logreport(report):
    if report.when == "call" and report.failed:      # on the controller too (user_properties travel)
        for name, value in getattr(report, "user_properties", ()):
            if name == _DIAGNOSIS_PROPERTY:
                _state.setdefault("diagnoses", []).append((report.nodeid, value))
    runs = _state.get("shard_runs")
    if runs is None or report.when != "call":
        return
    runs["tried"] += 1
    for name, value in getattr(report, "user_properties", ()):
        if name == _SHARD_PROPERTY:
            runs["failures"][report.nodeid] = value


def pytest_sessionstart(session):
    if getattr(session.config, "_triton_dist_shard", None) is not None:
        _state["shard_runs"] = session.config._triton_dist_shard_runs


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    shard = getattr(config, "_triton_dist_shard", None)
    if shard is None or hasattr(config, "workerinput"):     # the controller writes the one file
        return
    from triton_dist import seed_shards
    runs = config._triton_dist_shard_runs
    path = config.getoption("--sim-seed-results") or seed_shards.default_path("pytest", shard)
    config._triton_dist_shard_path = seed_shards.write(
        path, source="pytest", shard=shard, first=config.getoption("--sim-seed") or 0,
        count=config.getoption("--sim-seeds"), schedule=config.getoption("--sim-schedule"),
        tried=runs["tried"], failures=runs["failures"])


@pytest.fixture(autouse=True)
def _triton_dist_forget_last_launch():
    """Each test's replay line describes that test's own launches."""
    if _loaded():
        sys.modules["triton_dist.launcher"].LAST_LAUNCH.clear()
    yield


# --- --npu-compile --------------------------------------------------------------------------------------
# The check itself runs in whichever process launches a kernel (ranks, pytest-xdist workers,
# `triton-dist run` ranks): it is switched on through the environment they inherit
# (TRITON_DIST_LAUNCH_CHECKS, triton_dist/kernel_launches.py), and each of them appends what it
# checked to one log (TRITON_DIST_NPU_COMPILE_LOG) that the controller sums up at the end.
_CHECKS_ENV = "TRITON_DIST_LAUNCH_CHECKS"
_LOG_ENV = "TRITON_DIST_NPU_COMPILE_LOG"
_SOURCES_ENV = "TRITON_DIST_NPU_COMPILE_SOURCES"
_TARGET_ENV = "TRITON_DIST_NPU_COMPILE_TARGET"


def _check_targets(chips) -> None:
    """An unknown chip is a usage error at the start (in bishengir-compile's words, with the list), not a
    failure of every launching test.  Asked of the registered npu-compile check (the core never imports
    a backend package: triton_dist/registry.py)."""
    from triton_dist import registry
    from triton_dist.errors import TritonDistError
    try:
        check = registry.launch_check("npu-compile")
    except TritonDistError:
        return                      # no npu-compile check installed: every launch check says so
    problem = getattr(check, "target_problem", None)
    why = problem(chips) if problem is not None else None
    if why:
        raise pytest.UsageError(f"--npu-compile-targets: {why}")


def _enable_check_with_log(config, check: str, log_env: str, saved_env: tuple, log_attr: str) -> None:
    """Add launch check `check` to TRITON_DIST_LAUNCH_CHECKS and, in the controller (not an xdist
    worker, which inherits it), point `log_env` at a fresh log file, kept as config.<log_attr> for the
    summary.  What the environment held before is kept for _restore_check_env, so a nested session
    leaves it as it was."""
    if not hasattr(config, "_triton_dist_saved_env"):
        config._triton_dist_saved_env, config._triton_dist_logs = [], []
    config._triton_dist_saved_env.append({k: os.environ.get(k) for k in saved_env})
    names = [n for n in (os.environ.get(_CHECKS_ENV) or "").split(",") if n.strip()]
    if check not in names:
        os.environ[_CHECKS_ENV] = ",".join(names + [check])
    if not os.environ.get(log_env) and not hasattr(config, "workerinput"):    # the controller owns the log
        import tempfile
        fd, path = tempfile.mkstemp(prefix=f"triton_dist-{check}-", suffix=".jsonl")
        os.close(fd)
        os.environ[log_env] = path
        config._triton_dist_logs.append(path)
        setattr(config, log_attr, path)


def _restore_check_env(config) -> None:
    """Undo every _enable_check_with_log, the last first (each saved the environment the one before
    it had set), and remove the logs the controller made."""
    for path in getattr(config, "_triton_dist_logs", []):
        try:
            os.unlink(path)
        except OSError:
            pass
    for saved in reversed(getattr(config, "_triton_dist_saved_env", [])):
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _npu_compile_configure(config) -> None:
    chips = config.getoption("--npu-compile-targets")
    if chips:
        _check_targets(chips)
    _enable_check_with_log(config, "npu-compile", _LOG_ENV,
                           (_CHECKS_ENV, _LOG_ENV, _SOURCES_ENV, _TARGET_ENV), "_triton_dist_npu_log")
    if chips:
        os.environ[_TARGET_ENV] = chips
    sources = config.getoption("--npu-compile-sources")
    if sources:
        os.environ[_SOURCES_ENV] = ",".join(os.path.abspath(p.strip()) for p in sources.split(",") if p.strip())


def _toolchain_module():
    """backend_ascend/toolchain.py loaded by path (it imports nothing of triton_dist): the header
    can say whether the compilers are here without activating triton_dist."""
    spec = importlib.util.find_spec("triton_dist")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = os.path.dirname(list(spec.submodule_search_locations)[0])
    for path in (os.path.join(root, "backend_ascend", "toolchain.py"),
                 os.path.join(list(spec.submodule_search_locations)[0], "backend_ascend", "toolchain.py")):
        if os.path.exists(path):
            name = "_triton_dist_toolchain_probe"
            if name not in sys.modules:
                tspec = importlib.util.spec_from_file_location(name, path)
                mod = importlib.util.module_from_spec(tspec)
                sys.modules[name] = mod            # dataclasses look their module up there
                tspec.loader.exec_module(mod)
            return sys.modules[name]
    return None


def _npu_compile_header(config) -> list:
    if not config.getoption("--npu-compile"):
        return []
    try:
        tools = _toolchain_module().find()
    except Exception as e:  # noqa: BLE001 - the header must never break pytest
        return [f"triton_dist --npu-compile: the compilers cannot be looked for ({type(e).__name__}: {e})"]
    if tools.missing:
        return [f"triton_dist --npu-compile: kernels will be skipped, missing {'; '.join(tools.missing)}"]
    chips = config.getoption("--npu-compile-targets") or "Ascend910B4"
    return [f"triton_dist --npu-compile: triton-adapter-opt from {tools.adapter_from}, bishengir-compile from "
            f"{tools.compiler_from}; target {chips}"]


def _log_records(path) -> list:
    """The JSON lines of a launch check's log (one per kernel judged, appended by every process
    that launched one); a line cut short by a process that died while writing is skipped."""
    import json
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def npu_compile_summary(path) -> str:
    """The one line that sums up a session's log: distinct kernels accepted (compiled now or
    from the cache), refused, skipped."""
    records = {}
    for r in _log_records(path):
        prev = records.get(r["key"])
        if prev is None or not r.get("cached", True):
            records[r["key"]] = r
    by = {"accepted": [], "refused": [], "known-limit": [], "skipped": []}
    for r in records.values():
        by.setdefault(r["status"], []).append(r)
    fresh = sum(1 for r in by["accepted"] if not r.get("cached"))
    spent = sum(sum(r.get("compile_seconds", {}).values()) for r in records.values() if not r.get("cached"))
    text = (f"npu-compile: {len(records)} distinct kernels: {len(by['accepted'])} accepted ({fresh} compiled now, "
            f"{len(by['accepted']) - fresh} from the cache), {len(by['refused'])} refused, "
            f"{len(by['known-limit'])} known limits, {len(by['skipped'])} skipped; {spent:.1f} s compiling")
    if by["refused"]:
        text += "; refused: " + ", ".join(sorted({r["kernel"] for r in by["refused"]}))
    if by["known-limit"]:
        text += "; known limits (docs/ascend.md): " + ", ".join(sorted({r["kernel"] for r in by["known-limit"]}))
    if by["skipped"]:
        reasons = sorted({r.get("reason", "").split(":")[0].split(" (")[0] for r in by["skipped"]})
        text += "; skipped: " + ", ".join(sorted({r["kernel"] for r in by["skipped"]})) + f" ({'; '.join(reasons)})"
    if by.get("error"):        # the check could not run (backend_ascend/compile_check.py): those launches failed
        text += (f"; {len(by['error'])} could not be checked (their launches failed): "
                 + ", ".join(sorted({r["kernel"] for r in by["error"]})))
    return text


# --- --npu-lint -----------------------------------------------------------------------------------------
# The launch check "npu-lint" (backend_ascend/lint_check.py, found by entry point) runs in whichever
# process launches a kernel and appends each distinct (kernel, signature, grid, target) it judged to one
# log; the controller prints it at the end.
_LINT_LOG_ENV = "TRITON_DIST_NPU_LINT_LOG"


def _npu_lint_configure(config) -> None:
    _enable_check_with_log(config, "npu-lint", _LINT_LOG_ENV, (_CHECKS_ENV, _LINT_LOG_ENV), "_triton_dist_lint_log")


def npu_lint_summary(path) -> list:
    """The lines of the --npu-lint section: per distinct kernel launch (kernel, signature, constexprs,
    grid, target), its findings with their fixes, or 'no findings'."""
    import json
    records = {}
    for r in _log_records(path):
        key = json.dumps([r.get("kernel"), r.get("file"), r.get("signature"), r.get("constexprs"), r.get("grid"),
                          r.get("target")], sort_keys=True)
        records.setdefault(key, r)
    if not records:
        return ["no kernel was launched on the simulator: nothing to lint"]
    out = []
    for r in sorted(records.values(), key=lambda r: (r.get("kernel") or "", str(r.get("grid")))):
        sig = ", ".join(f"{k}={v}" for k, v in (r.get("signature") or {}).items())
        consts = ", ".join(f"{k}={v}" for k, v in (r.get("constexprs") or {}).items())
        grid = tuple(r["grid"]) if r.get("grid") else "unknown"
        head = (f"kernel {r.get('kernel')} ({os.path.relpath(r['file']) if r.get('file') else '?'}; {sig}"
                f"{'; ' + consts if consts else ''}) grid {grid} on {r.get('target')}: ")
        found = r.get("findings") or []
        out.append(head + (f"{len(found)} finding(s)" if found else "no findings"))
        for f in found:
            out.append(f"  {f['kind']}: {f['text']}.  Fix: {f['fix']}.  ({f['source']})")
        if r.get("note"):
            out.append(f"  ({r['note']})")
    return out


def diagnosis_summary(diagnoses) -> list:
    """Failed tests grouped by the device model's diagnosis ('[fence]', '[never signalled]', ...),
    the most frequent first, one example each with its seed and the finding's words."""
    kinds = {}
    for nodeid, d in diagnoses:
        kinds.setdefault(d["finding"].split("]", 1)[0] + "]", []).append((nodeid, d))
    lines = ["triton_dist: failed tests by what the device model saw:"]
    for label, hits in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        nodeid, d = hits[0]
        at = f" at seed {d['seed']}" if d.get("seed") is not None else ""
        lines.append(f"  {len(hits):4d} x {label}  e.g. {nodeid}{at}: {d['finding'][len(label):].strip()}")
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _state.get("diagnoses"):
        for line in diagnosis_summary(_state["diagnoses"]):
            terminalreporter.write_line(line)
    path = getattr(config, "_triton_dist_npu_log", None) or (
        os.environ.get(_LOG_ENV) if config.getoption("--npu-compile") and not hasattr(config, "workerinput")
        else None)
    if path:
        terminalreporter.write_line(npu_compile_summary(path))
    lint_log = getattr(config, "_triton_dist_lint_log", None)
    if lint_log:
        terminalreporter.write_sep("=", "npu-lint: performance cliffs on the NPU (backend_ascend/lint.py)")
        for line in npu_lint_summary(lint_log):
            terminalreporter.write_line(line)
    shard_path = getattr(config, "_triton_dist_shard_path", None)
    if shard_path:
        shard = config._triton_dist_shard
        terminalreporter.write_line(f"seed shard {shard[0]}/{shard[1]} (seeds s with s mod {shard[1]} == {shard[0]}) "
                                    f"written to {shard_path}; join the shards with `triton-dist explore-merge FILES...`")
