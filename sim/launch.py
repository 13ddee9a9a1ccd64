"""launch(backend="sim"): run a function in N simulated ranks.

Before forking, the launcher creates the symmetric heaps and the status board as
anonymous shared mappings, so every rank sees every heap at the same address and nothing
is ever named in /dev/shm: a rank that raises, is SIGKILLed or times out leaves nothing
behind.  Deterministic schedules share one baton (sim/schedulers/deterministic.py); the
launcher watches the status board (sim/watchdog.py) and collects race logs and traces.
The fork / collect / teardown skeleton is the core's (triton_dist/launcher.py).
"""
from __future__ import annotations

import os
import random
import shutil
import tempfile
import time

from triton_dist import launcher as L
from triton_dist.errors import DeadlockError, LaunchTimeoutError, RankError, TritonDistError

# What the simulator uses for an option neither the caller nor the session set.
OPTION_DEFAULTS = {"schedule": "free", "seed": None, "memory_model": "ascend", "barrier_plus_one": True,
                   "trace": None, "race_check": False, "predict": None, "npu_compile": False}
# Simulator-only session settings the command line sets: how many events a failure report
# keeps, and the command that replays a failure (instead of a launch() call).
SESSION = {"events": 40, "replay_cmd": None}
execution_env = L.execution_env


FREE_HINT = ("this run used the free schedule, which does not replay: reproduce it under a deterministic "
             "schedule, e.g. triton_dist.launch(fn, ..., schedule='explore', seed=S) for S in range(50) "
             "(or `triton-dist explore`, `pytest --sim-schedule explore --sim-seeds 50`), and check it for "
             "races with launch(..., race_check=True) (`--race-check`, `pytest --sim-race-check`)")


def check_options(schedule, memory_model, race_check) -> None:
    from . import cache, schedulers
    cache.make(memory_model)
    schedulers.check(schedule)
    if race_check not in (True, False, "report"):
        raise TritonDistError(f"launch: race_check must be True, False or 'report', got {race_check!r}")


def check_input(seed, trace, barrier_plus_one) -> None:
    """Options of the wrong type, or a trace file that cannot be written, are refused before
    anything runs (a run whose trace fails at the end would lose its results)."""
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise TritonDistError(f"launch: seed must be an int (or None: a random one, reported in the result), "
                              f"got {seed!r}; e.g. seed=17")
    from . import schedulers
    why = schedulers.seed_problem(seed)
    if why is not None:
        raise TritonDistError(f"launch: seed {why}")
    if not isinstance(barrier_plus_one, bool):
        raise TritonDistError(f"launch: barrier_plus_one must be True or False, got {barrier_plus_one!r}")
    if trace is None:
        return
    if isinstance(trace, bool) or not isinstance(trace, (str, os.PathLike)) or \
            not isinstance(os.fspath(trace), str) or not os.fspath(trace):
        raise TritonDistError(f"launch: trace must be a file path to write the Chrome/Perfetto trace to (a str "
                              f"or os.PathLike), got {trace!r}; e.g. trace='run.json'")
    path = os.path.abspath(os.fspath(trace))
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        raise TritonDistError(f"launch: trace={trace!r} is a directory; pass a file path in it, e.g. "
                              f"{os.path.join(path, 'trace.json')!r}")
    if not os.path.isdir(folder):
        raise TritonDistError(f"launch: trace={trace!r}: directory {folder} does not exist; create it first or "
                              f"write the trace into an existing directory")
    if not os.access(folder, os.W_OK):
        raise TritonDistError(f"launch: trace={trace!r}: directory {folder} is not writable; write the trace "
                              f"somewhere you may write")


class CheckSeconds:
    """Seconds each rank spent in the named launch checks (kernel_launches: the NPU compile of
    --npu-compile), in memory shared with the launcher: that time is not the ranks running, so
    the launch timeout leaves it out.  The ranks of a launch compile a kernel once, the others
    waiting for its verdict, so what is left out is the most any rank spent, not the sum.
    Per rank: the seconds of its finished checks, and since when its current one runs (0: none;
    time.monotonic() is CLOCK_MONOTONIC, one clock for every process of the machine)."""

    def __init__(self, world_size: int):
        import mmap

        import numpy as np
        self._mm = mmap.mmap(-1, 16 * world_size, flags=mmap.MAP_SHARED)
        self._slots = np.ndarray((world_size, 2), dtype=np.float64, buffer=self._mm)

    def listen(self, rank: int) -> None:
        """In rank `rank`: keep the time of each launch's checks in its slot."""
        from triton_dist import kernel_launches
        slot = self._slots[rank]

        def running(begins):
            now = time.monotonic()
            if begins:
                slot[1] = now
            else:
                slot[0] += now - slot[1]
                slot[1] = 0.0
        kernel_launches.on_checks(running)

    def most(self) -> float:
        now = time.monotonic()
        return max(float(done) + (now - since if since else 0.0) for done, since in self._slots)


def _rank_main(rank, world_size, listener, heaps, board, options, fn, args, kwargs, conn):
    """Body of a forked rank: initialize, run fn, send back the outcome, exit."""
    # (torch is kept to one intra-op thread by launcher._rank_start, as in every backend's ranks)
    L.install_stack_dump()
    if options.get("race") is not None:
        _install_race_dump()
    from . import board as B
    try:
        # the simulator, or a subclass registered under its own name (tests/twin_backends.py)
        L.set_rank_environment(rank, world_size, options.pop("backend_name", "sim"))
        check_seconds = options.pop("check_seconds")
        from triton_dist import backend
        store = L.rank_store(rank, world_size, listener, options["timeout"])
        be = backend.active()
        be.init(rank, world_size, heaps=heaps, board=board, store=store, **options)
        board.set_state(rank, -1, B.RUNNING)
        check_seconds.listen(rank)
        value = fn(*args, **kwargs)
        # only a rank that finished hands the baton on: after a failure the schedule stops
        # where it failed, so the digest and events of a replay match exactly
        be.rt.sched.finish()
        if be.rt.observers is not None:
            # what the subscribers recorded: the race detector's access logs, the predictor's
            # op lists, for the launcher's analysis
            be.rt.observers.dump()
        result = L.pack_value(rank, value)
    except BaseException as e:  # noqa: BLE001 - everything is reported to the launcher
        result = L.pack_error(e)
        if options.get("race") is not None:
            _dump_race_log()        # what it recorded until the failure, for the launcher's check
    try:
        board.wrote()           # what the rank's host code wrote last
        board.set_state(rank, -1, B.DONE)
    finally:
        L.report(conn, result)


def launch(fn, args, kwargs, *, world_size, timeout, **given) -> L.LaunchResult:
    """Run a launch (_launch); its failure is raised from here with the frames below cut off.

    Those frames hold every heap (world_size x 256 MiB), the board, the schedule and the
    ranks' handles: a RankError/DeadlockError/LaunchTimeoutError/RaceError kept by the caller (a list of
    failures, pytest's report) would pin them all.  What the error says is in its message,
    its rank traceback and its replay line; a finished launch holds nothing."""
    __tracebackhide__ = L.hide_launch_frames   # pytest shows the user's frames, not ours
    from triton_dist import kernel_launches
    from triton_dist.errors import RaceError
    # the ranks are forked inside: they inherit the checks switched on here
    backend_name = given.pop("backend_name", "sim")
    npu_compile = given.pop("npu_compile", False)
    if npu_compile not in (True, False):
        raise TritonDistError(f"launch: npu_compile must be True or False, got {npu_compile!r}")
    checks = ["npu-compile"] if npu_compile else []
    try:
        with kernel_launches.checks(checks):
            return _launch(fn, args, kwargs, world_size=world_size, timeout=timeout, backend_name=backend_name,
                           **given)
    except (RankError, DeadlockError, LaunchTimeoutError, RaceError) as e:
        failure = e.with_traceback(None)
    raise failure


def _launch(fn, args, kwargs, *, world_size, timeout, backend_name="sim", **given) -> L.LaunchResult:
    from . import board as B
    from . import heap
    from .watchdog import BoardWatchdog
    opts = {**OPTION_DEFAULTS, **given}
    schedule, seed, memory_model = opts["schedule"], opts["seed"], opts["memory_model"]
    trace, race_check, barrier_plus_one = opts["trace"], opts["race_check"], opts["barrier_plus_one"]
    check_options(schedule, memory_model, race_check)
    check_input(seed, trace, barrier_plus_one)
    heap_bytes = heap.heap_bytes()
    if schedule != "free" and seed is None:
        seed = random.SystemRandom().randrange(2 ** 32)
    L.LAST_LAUNCH.update(schedule=schedule, seed=seed, memory_model=memory_model)
    start = time.monotonic()
    listener = L.listen_socket()
    heaps = heap.anonymous_heaps(world_size, heap_bytes)
    board = B.Board(world_size)
    for r in range(world_size):
        board.set_state(r, -1, B.RUNNING)
    shared = None
    if schedule != "free":
        from .schedulers.deterministic import SharedSchedule
        shared = SharedSchedule(world_size, seed)
    trace_dir = tempfile.mkdtemp(prefix="triton_dist-trace-") if trace else None
    race_dir = None
    if race_check:
        from .race import SlotTable
        race_dir = tempfile.mkdtemp(prefix="triton_dist-race-")
    from .evidence.board import EvidenceBoard
    evidence = EvidenceBoard()        # what the device model saw (sim/evidence/), for a failure's words
    check_seconds = CheckSeconds(world_size)
    options = dict(schedule=schedule, seed=seed, timeout=float(timeout), memory_model=memory_model,
                   barrier_plus_one=bool(barrier_plus_one), shared=shared,
                   trace_dir=trace_dir, trace_t0=time.time(),
                   race=(race_dir, SlotTable()) if race_dir else None, backend_name=backend_name,
                   evidence=evidence, check_seconds=check_seconds)
    if opts["predict"] is not None:
        from . import predict
        options["predict"] = predict.start(opts["predict"])
    procs, pipes, outcomes = [], [], None
    try:
        procs, pipes = L.fork_ranks(world_size, _rank_main,
                                    (world_size, listener, heaps, board, options, fn, args, kwargs))
        try:
            # the free schedule's watchdog judges deadlocks; deterministic schedules find them exactly
            outcomes = L.collect(procs, pipes, timeout, start,
                                 BoardWatchdog(board, timeout, heaps, judge=schedule == "free"),
                                 left_out=check_seconds.most)
        except (RankError, DeadlockError, LaunchTimeoutError) as e:
            _explain(e, evidence, board, heaps, world_size)
            if race_dir is not None:
                _check_failed_launch(e, procs, race_dir, world_size)
            if shared is not None:
                _add_replay(e, fn, world_size, schedule, seed, memory_model, barrier_plus_one, shared,
                            _namer(evidence, heaps))
                L.LAST_FAILURE.update(schedule=schedule, seed=seed, memory_model=memory_model)
            elif getattr(e, "exc_type", None) not in L.SCHEDULE_INDEPENDENT_FAILURES:
                from .evidence import explain
                hint = L.FAILURE_HINT.get("free") or FREE_HINT
                explain.add_text(e, "\n" + hint + (f" (set in this run: {execution_env().strip()})"
                                                   if execution_env() else ""))
            raise
    finally:
        L.teardown(procs, pipes, listener)
        if trace_dir is not None:
            from . import trace as T
            T.merge(trace_dir, trace, world_size, shared is not None)
            shutil.rmtree(trace_dir, ignore_errors=True)
        if race_dir is not None and outcomes is None:
            shutil.rmtree(race_dir, ignore_errors=True)
        if options.get("predict") is not None and outcomes is None:
            shutil.rmtree(options["predict"][0], ignore_errors=True)
    result = L.LaunchResult(values=L.values_of(outcomes), seed=seed,
                            schedule_digest=shared.digest() if shared else "",
                            wall_seconds=time.monotonic() - start, schedule=schedule,
                            steps=shared.steps() if shared else 0,
                            switches=shared.switches() if shared else 0)
    if options.get("predict") is not None:
        from . import predict
        predict.finish(result, options["predict"], opts["predict"], ok=True)
    if race_dir is not None:
        _check_races(result, race_dir, world_size, race_check)
    return result


def _check_races(result, race_dir, world_size, race_check):
    """Analyse the ranks' access logs (sim/race/); raise RaceError if asked to."""
    from . import race
    try:
        result.races = race.analyze(race_dir, world_size)
    finally:
        shutil.rmtree(race_dir, ignore_errors=True)
    if result.races and race_check is True:
        raise race.RaceError(result.races, result)


FAILED_DUMP_SECONDS = 3.0     # how long a failed launch waits for its live ranks' race logs


def _install_race_dump():
    """SIGUSR2 makes a rank write its race log as it stands (the launcher asks so of the ranks
    still running when a launch failed); the handler runs in the main thread, between two
    bytecodes (a rank waiting for the baton wakes every WAKE_CHECK_SECONDS)."""
    import signal
    try:
        signal.signal(signal.SIGUSR2, lambda *_: _dump_race_log())
    except (ValueError, OSError):
        pass


def _dump_race_log():
    try:
        from . import race
        race.dump_active()
    except Exception:  # noqa: BLE001 - a failing dump leaves no log, which the launcher reports
        pass


def _check_failed_launch(e, procs, race_dir, world_size):
    """A launch that failed with the race check on: ask the ranks still running for their
    logs, analyse them, and add the races (or why there is no analysis) to the failure;
    e.races holds them (None: not analysed)."""
    import signal
    from triton_dist.errors import race_report

    from . import race
    from .evidence import explain
    path = lambda r: os.path.join(race_dir, f"rank{r}.pkl")  # noqa: E731
    for r, p in enumerate(procs):
        if not os.path.exists(path(r)) and p.is_alive():
            try:
                os.kill(p.pid, signal.SIGUSR2)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + FAILED_DUMP_SECONDS
    while time.monotonic() < deadline and not all(os.path.exists(path(r)) or not p.is_alive()
                                                  for r, p in enumerate(procs)):
        time.sleep(0.05)
    try:
        races, missing = race.analyze_available(race_dir, world_size)
    except Exception as why:  # noqa: BLE001 - the failure itself must come out
        races, missing = None, []
        words = f"the race check could not analyse the failed launch ({type(why).__name__}: {why})"
    else:
        if races is None:
            words = (f"the race check did not analyse this failed launch: rank{'s' if len(missing) > 1 else ''} "
                     f"{', '.join(map(str, missing))} left no log (stopped before it could write one), and "
                     f"without every rank's log an ordering edge could be missing")
        else:
            words = "the race check of this failed launch (what the ranks recorded until it stopped): " + \
                race_report(races)
    e.races = races
    explain.add_text(e, "\n" + words)


def _explain(e, evidence, board, heaps, world_size):
    """Append what the device model saw (sim/evidence/) to the failure."""
    from .evidence import explain
    namer = _namer(evidence, heaps)
    explain.attach(e, evidence, board, namer, world_size)


def _namer(evidence, heaps):
    """Names of heap addresses as the ranks give them (sim/naming.py), from the allocations
    the ranks told the evidence board."""
    from . import heap, naming
    return naming.HeapNamer([heap.address_of(m) for m in heaps], len(heaps[0]), evidence.allocation,
                            heap.RESERVED_BYTES)


def _add_replay(e, fn, world_size, schedule, seed, memory_model, barrier_plus_one, shared, namer=None):
    """Make a failure under a deterministic schedule say how to reproduce it exactly."""
    e.seed = seed
    e.schedule = schedule
    e.schedule_digest = shared.digest()
    name = None if namer is None else (lambda r, off: namer.name(namer.bases[r] + off))
    e.events = shared.last_events(SESSION["events"], name)
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "fn"))
    extra = "" if memory_model == "ascend" else f", memory_model={memory_model!r}"
    extra += "" if barrier_plus_one else ", barrier_plus_one=False"
    env = execution_env()
    e.replay = (f"triton_dist.launch({name}, ..., world_size={world_size}, schedule={schedule!r}, "
                f"seed={seed}{extra})" + (f" with {env.strip()} in the environment" if env else ""))
    if SESSION.get("replay_cmd"):            # set by the command line: replay it the same way
        e.replay = SESSION["replay_cmd"].format(seed=seed, schedule=schedule)
    from . import schedulers
    member = schedulers.describe(schedule, seed)
    line = (f"\nseed {seed} under schedule={schedule!r}{f' (member {member})' if member else ''}; "
            f"replay exactly with: {e.replay}")
    if isinstance(e, (DeadlockError, LaunchTimeoutError)):
        e.message += line
        e.args = (e.message + ("\n" + e.report if e.report else ""),)
    else:
        e.message += line
        e.args = (str(e),)
