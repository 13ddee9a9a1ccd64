"""launch(): run a function in N simulated ranks and collect what they return.

Ranks start warm: they are forked from the calling process, which has already imported
torch and triton, so a launch costs a fork and a gloo rendezvous (about 0.1 s for 4
ranks) instead of ~2.5 s of imports per rank.  Before forking, the launcher creates the
symmetric heaps and the status board as anonymous shared mappings, so every rank sees
every heap at the same address and nothing is ever named in /dev/shm: a rank that raises,
is SIGKILLed or times out leaves nothing behind.

The launcher watches the status board: when every unfinished rank is blocked (waiting
in a primitive, or in a host collective) and nothing changes for a few seconds, it tears
the ranks down and raises DeadlockError with the board's report.
"""
from __future__ import annotations

import os
import random
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field

import multiprocess as mp
from multiprocess import connection

from .errors import DeadlockError, RankError, TritonDistError
from sim.race import RaceError  # noqa: F401  (raised by launch(race_check=True))

MAX_WORLD_SIZE = 64

# What launch() uses for an option its caller leaves as None: the pytest plugin
# (--sim-schedule/--sim-seed) and `triton-dist run` set these.
DEFAULTS = {"schedule": "free", "seed": None, "memory_model": "ascend", "trace": None,
            "race_check": False, "events": 40}
# schedule and seed of the last launch of this process (for replay lines)
LAST_LAUNCH: dict = {}
# The last failed launch of this process under a deterministic schedule (for replay lines).
LAST_FAILURE: dict = {}
LAUNCHES = [0]
STALL_SECONDS = float(os.environ.get("TRITON_DIST_STALL_SECONDS", "3"))


@dataclass
class LaunchResult:
    values: list
    seed: int | None = None
    schedule_digest: str = ""
    wall_seconds: float = 0.0
    schedule: str = "free"
    steps: int = 0          # scheduling decisions taken (deterministic schedules)
    switches: int = 0       # of which handed the baton to another task
    races: list = field(default_factory=list)   # sim.race.Race found by race_check (docs/races.md)

    @property
    def race_report(self) -> str:
        from sim.race import report
        return report(self.races)


def _check_args(world_size, backend, schedule, timeout, memory_model):
    if not isinstance(world_size, int) or isinstance(world_size, bool) or not 1 <= world_size <= MAX_WORLD_SIZE:
        raise TritonDistError(f"launch: world_size must be an int in 1..{MAX_WORLD_SIZE}, got {world_size!r}")
    if backend not in ("sim", "npu", "cuda"):
        raise TritonDistError(f"launch: backend must be 'sim', 'npu' or 'cuda', got {backend!r}")
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise TritonDistError(f"launch: timeout must be a positive number of seconds, got {timeout!r}")
    from sim import cache, schedulers
    cache.make(memory_model)
    schedulers.check(schedule)


def _rank_main(rank, world_size, listener, heaps, board, options, fn, args, kwargs, conn):
    """Body of a forked rank: initialize, run fn, send back the outcome, exit."""
    import dill
    import faulthandler

    import torch
    # GNU OpenMP does not survive fork: if the launching process ever ran a parallel torch
    # op, a rank that enters an OpenMP region hangs.  One intra-op thread per rank keeps
    # torch out of OpenMP (and N ranks on few cores gain nothing from more, which is why
    # torchrun sets OMP_NUM_THREADS=1 too).
    torch.set_num_threads(1)
    result = None
    try:
        # `kill -USR1 <pid>` (and the launcher, on a timeout) prints every thread's stack,
        # to the real stderr (sys.stderr may be a capture without a file descriptor).
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    except (AttributeError, ValueError, OSError, RuntimeError):
        pass
    try:
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                          LOCAL_WORLD_SIZE=str(world_size), TRITON_DIST_BACKEND="sim")
        from . import backend
        store = rank_store(rank, world_size, listener, options["timeout"])
        be = backend.active()
        be.init(rank, world_size, heaps=heaps, board=board, store=store, **options)
        from sim import board as B
        board.set_state(rank, -1, B.RUNNING)
        value = fn(*args, **kwargs)
        # only a rank that finished hands the baton on: after a failure the schedule stops
        # where it failed, so the digest and events of a replay match exactly
        be.rt.sched.finish()
        if options.get("race") is not None:
            from sim import race
            race.dump_active()        # this rank's access log, for the launcher's analysis
        result = pack_value(rank, value)
    except DeadlockError as e:
        result = dill.dumps(("deadlock", e.message, e.report))
    except BaseException as e:  # noqa: BLE001 - everything is reported to the launcher
        result = dill.dumps(("err", type(e).__name__, str(e), traceback.format_exc()))
    try:
        from sim import board as B
        board.set_state(rank, -1, B.DONE)
        conn.send_bytes(result)
        conn.close()
    finally:
        os._exit(0)


def pack_value(rank, value) -> bytes:
    """A rank's return value as the message the launcher reads (or the error saying why it can't be)."""
    import dill
    try:
        return dill.dumps(("ok", value))
    except Exception as e:  # noqa: BLE001
        return dill.dumps(("err", "PicklingError",
                           f"the return value of rank {rank} ({type(value).__name__}) cannot be sent back to the "
                           f"launcher: {e}. Return plain data (numbers, lists, tensors).", ""))


def teardown(procs, pipes, listener) -> None:
    """Kill the ranks still running, reap them all, close their pipes and the listener."""
    for p in procs:
        if p.is_alive():
            os.kill(p.pid, signal.SIGKILL)
    for p in procs:
        p.join()
    for c in pipes:
        c.close()
    listener.close()


def rank_store(rank, world_size, listener, timeout):
    """The rendezvous store of a forked rank.  Rank 0 serves it on the socket the launcher
    bound before forking: the launcher itself never runs a store, so it has no c10d threads
    that a fork could catch holding a lock (that hung TCPStore clients in forked children)."""
    from torch.distributed import TCPStore
    port = listener.getsockname()[1]
    if rank == 0:
        return TCPStore("127.0.0.1", port, world_size, is_master=True, wait_for_workers=False,
                        master_listen_fd=listener.fileno(), timeout=_td(timeout))
    listener.close()
    return TCPStore("127.0.0.1", port, world_size, is_master=False, timeout=_td(timeout))


def _td(seconds):
    import datetime
    return datetime.timedelta(seconds=max(30.0, float(seconds)))


def launch(fn, *args, world_size, backend=None, schedule=None, seed=None, timeout=60.0,
           memory_model=None, barrier_plus_one=True, trace=None, race_check=None, **kwargs) -> LaunchResult:
    """Run fn(*args, **kwargs) in `world_size` ranks; return their values in rank order.

    backend: "sim" (simulated ranks), "cuda" (one GPU per rank) or "npu"; None: the backend
    this process compiles or interprets kernels for (TRITON_DIST_BACKEND, default auto).

    schedule: "free" (default), "random" or "pct"; seed: for the deterministic schedules
    (None: a random one, reported in the result); memory_model: "ascend" (default) or
    "coherent"; trace: a path to write a Chrome/Perfetto trace of the run to;
    race_check: True to check for races on symmetric memory and raise sim.race.RaceError
    (which carries the result) when there are any, "report" to only list them in
    LaunchResult.races (docs/races.md).  An option left as None takes the session default
    (launcher.DEFAULTS), which the pytest plugin and the command line set.
    """
    from sim import board as B
    from sim import heap
    if backend is None:
        from . import backend as _backend
        backend = _backend.resolve()      # where this process's kernels run (interpreted or compiled)
    schedule = DEFAULTS["schedule"] if schedule is None else schedule
    memory_model = DEFAULTS["memory_model"] if memory_model is None else memory_model
    seed = DEFAULTS["seed"] if seed is None else seed
    trace = DEFAULTS["trace"] if trace is None else trace
    race_check = DEFAULTS["race_check"] if race_check is None else race_check
    if race_check not in (True, False, "report"):
        raise TritonDistError(f"launch: race_check must be True, False or 'report', got {race_check!r}")
    LAUNCHES[0] += 1
    if not callable(fn):
        raise TritonDistError(f"launch: fn must be callable, got {type(fn).__name__}")
    if backend == "npu":
        # real NPUs: one spawned process per device (backend_ascend/runtime.py); the
        # simulator's options (schedules, memory models, traces) do not apply there
        _check_args(world_size, backend, "free", timeout, "ascend")
        from backend_ascend.runtime import launch as npu_launch
        start = time.monotonic()
        values = npu_launch(fn, *args, world_size=world_size, timeout=timeout, **kwargs)
        return LaunchResult(values=values, wall_seconds=time.monotonic() - start)
    if backend == "cuda":
        # real GPUs: one forked rank per GPU (backend_cuda/launch.py); the simulator's options
        # (schedules, memory models, traces, race checks) do not apply there
        _check_args(world_size, backend, "free", timeout, "ascend")
        from backend_cuda.launch import launch as cuda_launch
        start = time.monotonic()
        values = cuda_launch(fn, *args, world_size=world_size, timeout=timeout, **kwargs)
        return LaunchResult(values=values, wall_seconds=time.monotonic() - start)
    _check_args(world_size, backend, schedule, timeout, memory_model)
    if schedule != "free" and seed is None:
        seed = random.SystemRandom().randrange(2 ** 32)
    LAST_LAUNCH.update(schedule=schedule, seed=seed, memory_model=memory_model)
    start = time.monotonic()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    heaps = heap.anonymous_heaps(world_size, heap.DEFAULT_HEAP_BYTES)
    board = B.Board(world_size)
    for r in range(world_size):
        board.set_state(r, -1, B.RUNNING)
    shared = None
    if schedule != "free":
        from sim.schedulers.deterministic import SharedSchedule
        shared = SharedSchedule(world_size, seed)
    trace_dir = None
    if trace:
        import tempfile
        trace_dir = tempfile.mkdtemp(prefix="triton_dist-trace-")
    race_dir = None
    if race_check:
        import tempfile
        from sim.race import SlotTable
        race_dir = tempfile.mkdtemp(prefix="triton_dist-race-")
    options = dict(schedule=schedule, seed=seed, timeout=float(timeout), memory_model=memory_model,
                   barrier_plus_one=bool(barrier_plus_one), shared=shared,
                   trace_dir=trace_dir, trace_t0=time.time(),
                   race=(race_dir, SlotTable()) if race_dir else None)
    ctx = mp.get_context("fork")
    procs, pipes = [], []
    outcomes = None
    try:
        for r in range(world_size):
            rd, wr = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_rank_main, name=f"triton_dist-rank{r}",
                            args=(r, world_size, listener, heaps, board, options, fn, args, kwargs, wr))
            p.daemon = True
            p.start()
            wr.close()
            procs.append(p)
            pipes.append(rd)
        try:
            outcomes = collect(procs, pipes, board, timeout, start)
        except (RankError, DeadlockError) as e:
            if shared is not None:
                _add_replay(e, fn, world_size, schedule, seed, memory_model, barrier_plus_one, shared)
                LAST_FAILURE.update(schedule=schedule, seed=seed, memory_model=memory_model)
            raise
    finally:
        teardown(procs, pipes, listener)
        if trace_dir is not None:
            import shutil
            from sim import trace as T
            T.merge(trace_dir, trace, world_size, shared is not None)
            shutil.rmtree(trace_dir, ignore_errors=True)
        if race_dir is not None and outcomes is None:
            import shutil
            shutil.rmtree(race_dir, ignore_errors=True)
    values = []
    for r, (kind, *rest) in enumerate(outcomes):
        values.append(rest[0])
    digest = shared.digest() if shared else ""
    result = LaunchResult(values=values, seed=seed, schedule_digest=digest,
                          wall_seconds=time.monotonic() - start, schedule=schedule,
                          steps=shared.steps() if shared else 0,
                          switches=shared.switches() if shared else 0)
    if race_dir is not None:
        _check_races(result, race_dir, world_size, race_check)
    return result


def _check_races(result, race_dir, world_size, race_check):
    """Analyse the ranks' access logs (sim/race.py); raise RaceError if asked to."""
    import shutil
    from sim import race
    try:
        result.races = race.analyze(race_dir, world_size)
    finally:
        shutil.rmtree(race_dir, ignore_errors=True)
    if result.races and race_check is True:
        raise race.RaceError(result.races, result)


def main_or_launch(main, world_size=4) -> int:
    """For scripts: run `main` as this process's rank when started by torchrun or
    `triton-dist run` (RANK is set), else launch `world_size` simulated ranks of it.
    Returns an exit status: 0 when every rank's `main` returned something true."""
    if "RANK" in os.environ:
        ok = main()
        from . import finalize
        finalize()
        return 0 if ok else 1
    from . import backend as _backend
    if _backend.resolve() == "cuda":
        from backend_cuda.runtime import device_count
        if 0 < device_count() < world_size:
            print(f"[triton_dist] {device_count()} GPU(s) here: running {device_count()} ranks instead of "
                  f"{world_size}", file=sys.stderr)
            world_size = device_count()
    return 0 if all(launch(main, world_size=world_size).values) else 1


def _add_replay(e, fn, world_size, schedule, seed, memory_model, barrier_plus_one, shared):
    """Make a failure under a deterministic schedule say how to reproduce it exactly."""
    e.seed = seed
    e.schedule = schedule
    e.schedule_digest = shared.digest()
    e.events = shared.last_events(DEFAULTS["events"])
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "fn"))
    extra = "" if memory_model == "ascend" else f", memory_model={memory_model!r}"
    extra += "" if barrier_plus_one else ", barrier_plus_one=False"
    e.replay = (f"triton_dist.launch({name}, ..., world_size={world_size}, schedule={schedule!r}, "
                f"seed={seed}{extra})")
    if DEFAULTS.get("replay_cmd"):            # set by the command line: replay it the same way
        e.replay = DEFAULTS["replay_cmd"].format(seed=seed, schedule=schedule)
    line = f"\nseed {seed} under schedule={schedule!r}; replay exactly with: {e.replay}"
    if isinstance(e, DeadlockError):
        e.message += line
        e.args = (e.message + ("\n" + e.report if e.report else ""),)
    else:
        e.message += line
        e.args = (str(e),)


def collect(procs, pipes, board, timeout, start):
    """The ranks' outcomes in rank order; raises the first RankError/DeadlockError.  board:
    the simulator's status board (its watchdog and report), or None for real devices."""
    import dill
    n = len(procs)
    outcomes = [None] * n
    by_obj = {}
    for r in range(n):
        by_obj[pipes[r]] = r
        by_obj[procs[r].sentinel] = r
    stall_start, last = None, None
    while any(o is None for o in outcomes):
        waiting_on = [pipes[r] for r in range(n) if outcomes[r] is None] + \
                     [procs[r].sentinel for r in range(n) if outcomes[r] is None]
        for obj in connection.wait(waiting_on, timeout=0.1):
            r = by_obj[obj]
            if outcomes[r] is not None:
                continue
            if obj is pipes[r]:
                try:
                    outcomes[r] = dill.loads(pipes[r].recv_bytes())
                except (EOFError, OSError):
                    continue      # the sentinel will tell how it died
            else:
                if pipes[r].poll():
                    try:
                        outcomes[r] = dill.loads(pipes[r].recv_bytes())
                        continue
                    except (EOFError, OSError):
                        pass
                procs[r].join()
                code = procs[r].exitcode
                how = (f"was killed by signal {signal.Signals(-code).name}" if code is not None and code < 0
                       else f"exited with status {code}")
                outcomes[r] = ("err", "RankDied", f"rank {r} {how} before reporting a result", "")
        for r, o in enumerate(outcomes):
            if o is None:
                continue
            if o[0] == "err":
                raise RankError(r, o[1], o[2], o[3])
            if o[0] == "deadlock":
                raise DeadlockError(o[1], o[2])
        if time.monotonic() - start > timeout:
            _dump_stacks(procs, outcomes)
            if board is None:
                late = ", ".join(str(r) for r, o in enumerate(outcomes) if o is None)
                raise DeadlockError(f"launch timed out after {timeout:g} s",
                                    f"ranks still running: {late} (their Python stacks are on stderr)")
            raise DeadlockError(f"launch timed out after {timeout:g} s", board.report())
        # Watchdog: every unfinished rank blocked and nothing moving (simulated ranks only).
        if board is not None and _all_blocked(board, outcomes):
            snap = board.snapshot()
            if last is not None and (snap == last).all():
                stall_start = stall_start or time.monotonic()
                if time.monotonic() - stall_start > min(STALL_SECONDS, timeout):
                    raise DeadlockError(
                        f"no rank can make progress: every unfinished rank has been blocked for "
                        f"{STALL_SECONDS:g} s with nothing changing", board.report())
            else:
                stall_start = None
            last = snap
        else:
            stall_start, last = None, None
    return outcomes


def _dump_stacks(procs, outcomes):
    """Ask the ranks still running to print their Python stacks (to stderr) before teardown."""
    for r, p in enumerate(procs):
        if outcomes[r] is None and p.is_alive():
            try:
                os.kill(p.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
    time.sleep(0.2)


def _all_blocked(board, outcomes) -> bool:
    from sim import board as B
    for r, o in enumerate(outcomes):
        if o is not None:
            continue
        host = int(board.rec[r, B.HOST]["state"])
        if host == B.HOST_COLLECTIVE or host == B.DONE:
            continue
        if host != B.IN_KERNEL:
            return False
        states = board.rec[r, :B.MAX_CORES]["state"]
        if (states == B.RUNNING).any():
            return False
    return True
