"""launch(): run a function in N ranks of a backend and collect what they return.

The front (`launch`) validates what every backend shares (fn, world_size, timeout, which
backend, which options it accepts) and delegates to the backend's `launch`.  The rest of
this module is the launcher skeleton that backends which fork their ranks share: fork warm
ranks, collect their outcomes (first error first), pack results and errors, tear down.
It knows nothing of any backend: a simulator-specific watchdog plugs into `collect`.

Ranks start warm: they are forked from the calling process, and `launch` first imports
there what a rank will need (Backend.warm: torch, triton, the backend), so a launch costs a
fork and a gloo rendezvous instead of ~2.5 s of imports per rank, even from a script that
never imported torch itself.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field

from . import backend as _backend
from . import lifeline, registry
from .errors import DeadlockError, LaunchTimeoutError, RaceError, RankError, TritonDistError, race_report  # noqa: F401

MAX_WORLD_SIZE = 64

# Session defaults for options a caller leaves as None: the pytest plugin (--sim-schedule,
# --sim-seed, --sim-race-check) and `triton-dist run` set them.  A default applies only to
# a backend that accepts the option; the backend supplies its own default otherwise.
DEFAULTS: dict = {"schedule": None, "seed": None, "memory_model": None, "trace": None, "race_check": None,
                  "barrier_plus_one": None, "predict": None, "npu_compile": None}
# schedule and seed of the last launch of this process (for replay lines)
LAST_LAUNCH: dict = {}
# what a failure under a schedule that does not replay (the simulator's free one) suggests
# instead of a replay line: set by the command line and the pytest plugin to commands in their
# own terms; None: the backend's words for launch()
FAILURE_HINT: dict = {"free": None}
# failures that are a verdict on the kernel as written, the same under every schedule (the real
# NPU compilers refusing it under launch(npu_compile=True)): a hint to search schedules or races
# would send the user after the wrong bug, so none is added to them (names, as RankError has them)
# Failures no schedule changes (the advice to search schedules would mislead): the NPU compilers'
# verdicts; backend hivm's compile and lowering of a kernel and the unordered mix-kernel halves it
# judges by happens-before, not by the order they ran in (backend_ascend/cpu_run/)
SCHEDULE_INDEPENDENT_FAILURES = frozenset({"NpuCompileError", "NpuCompileCheckError", "CompileRefused",
                                           "LoweringFailed", "RewriteError", "Unsupported", "MixOrderHazard"})
# Environment variables that change what a launch does (the simulator's device profile, the
# heap size, poisoned new memory: sim/initcheck.py; the config autotuned kernels are checked
# against: sim/autotune.py): a replay line carries those that are set.
EXECUTION_ENV = ("TRITON_DIST_SIM_DEVICE", "TRITON_DIST_SIM_CORES", "TRITON_DIST_HEAP_SIZE", "TRITON_DIST_SIM_INIT_CHECK",
                 "TRITON_DIST_AUTOTUNE_REFERENCE")


def execution_env() -> str:
    """'NAME=value ' for each of EXECUTION_ENV set in this process (a shell prefix), or ''."""
    import shlex
    return "".join(f"{k}={shlex.quote(os.environ[k])} " for k in EXECUTION_ENV if os.environ.get(k))
# The last failed launch of this process under a deterministic schedule (for replay lines).
LAST_FAILURE: dict = {}
LAUNCHES = [0]
# Lists that every finished launch of this process is appended to, as (backend name,
# LaunchResult): `recording()` (the pytest plugin's --compare-backends).
_RECORDINGS: list = []
# Lists that main_or_launch appends the value of `main` to when it runs as a rank
# (`triton-dist compare` reads what a script's ranks returned).
MAIN_VALUES: list = []


@dataclass
class LaunchResult:
    values: list
    seed: int | None = None
    schedule_digest: str = ""
    wall_seconds: float = 0.0
    schedule: str = "free"
    steps: int = 0          # scheduling decisions taken (deterministic schedules)
    switches: int = 0       # of which handed the baton to another task
    races: list = field(default_factory=list)   # races found by race_check (docs/races.md)
    prediction: object = None   # predict=DEVICE: predicted times on that device (sim/predict, docs/prediction.md)

    @property
    def race_report(self) -> str:
        return race_report(self.races)


# Options of launch() besides world_size and timeout, in the order of its signature.
OPTIONS = ("schedule", "seed", "memory_model", "barrier_plus_one", "trace", "race_check", "predict", "npu_compile")


def launch(fn, *args, world_size, backend=None, schedule=None, seed=None, timeout=60.0,
           memory_model=None, barrier_plus_one=None, trace=None, race_check=None, predict=None,
           npu_compile=None, **kwargs) -> LaunchResult:
    """Run fn(*args, **kwargs) in `world_size` ranks; return their values in rank order.

    backend: a registered backend name ("sim", "cuda", "npu", ...) or None: the backend this
    process compiles or interprets kernels for (TRITON_DIST_BACKEND, default auto).

    The simulator's options (others reject them, naming the backend): schedule "free"
    (default), "random", "pct", "aware" or "explore" (docs/guide.md, "Deterministic schedules");
    seed for the deterministic schedules (None: a random one,
    reported in the result); memory_model "ascend" (default), "ascend-scalar-cache",
    "ascend-weak-atomics" or "coherent";
    barrier_plus_one (default True); trace: a path to write a Chrome/Perfetto trace to;
    race_check: True to raise RaceError (which carries the result) on races, "report" to
    only list them in LaunchResult.races (docs/races.md); predict: a device profile name
    ("h200-nvlink", "atlas-a2") to predict the run's kernel times on that device into
    LaunchResult.prediction (docs/prediction.md); npu_compile: True to compile
    every kernel the ranks launch with the real NPU compilers as well (the signature and
    constexprs of each launch; docs/ascend.md, "The real compiler on every kernel"): a kernel
    they refuse fails the launch with RankError naming NpuCompileError and the compiler's own
    lines.  An option left as None takes the session default (DEFAULTS), which the pytest plugin
    and the command line set.
    """
    __tracebackhide__ = hide_launch_frames
    LAUNCHES[0] += 1
    _refuse_inside_a_rank(fn, world_size)
    if not callable(fn):
        raise TritonDistError(f"launch: fn must be callable, got {type(fn).__name__}")
    if not isinstance(world_size, int) or isinstance(world_size, bool) or not 1 <= world_size <= MAX_WORLD_SIZE:
        raise TritonDistError(f"launch: world_size must be an int in 1..{MAX_WORLD_SIZE}, got {world_size!r}")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout < float("inf"):
        raise TritonDistError(f"launch: timeout must be a positive, finite number of seconds, got {timeout!r}")
    if backend is not None and (not isinstance(backend, str) or backend not in registry.backend_names()):
        raise TritonDistError(f"launch: backend must be one of {', '.join(map(repr, registry.backend_names()))}, "
                              f"got {backend!r}")
    name = backend if backend is not None else _backend.resolve()
    cls = registry.backend_class(name)
    given = dict(schedule=schedule, seed=seed, memory_model=memory_model, barrier_plus_one=barrier_plus_one,
                 trace=trace, race_check=race_check, predict=predict, npu_compile=npu_compile)
    options = {}
    for key in OPTIONS:
        value, from_session = given[key], False
        if value is None:
            value, from_session = DEFAULTS.get(key), True
        if value is None:
            continue
        if key not in cls.launch_options:
            if from_session:
                continue               # a session default for another backend's option
            accepted = ", ".join(sorted(cls.launch_options)) or "none"
            raise TritonDistError(f"launch: backend {name!r} does not take {key}={value!r} (options it takes "
                                  f"besides world_size and timeout: {accepted}); leave it out, or launch on a "
                                  f"backend that has it")
        options[key] = value
    cls.warm()                 # ranks fork warm: torch, triton and the backend imported once, here
    result = cls.launch(fn, args, kwargs, world_size=world_size, timeout=float(timeout), **options)
    for rec in _RECORDINGS:
        rec.append((name, result))
    return result


class recording:
    """`with recording() as runs:` collects (backend name, LaunchResult) of every launch that
    finished inside, in order."""

    def __enter__(self):
        self.runs = []
        _RECORDINGS.append(self.runs)
        return self.runs

    def __exit__(self, *exc):
        _RECORDINGS.remove(self.runs)
        return False


# the packages whose modules a script imports at its top are imported by the launcher before
# the ranks fork (warm ranks, issue 25); a script's own modules are left to the ranks
WARM_PACKAGES = ("torch", "triton", "triton_dist", "numpy")
_warmed: set = set()


def script_imports(path: str) -> list:
    """The modules of WARM_PACKAGES the script imports at its top level (`import torch`,
    `from triton_dist import kernels`: triton_dist and triton_dist.kernels), without running it."""
    import ast
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return []              # the rank runs it and reports what is wrong
    out = []
    body = list(tree.body)
    for node in body:
        if isinstance(node, ast.Try):           # `try: import x except ImportError: ...`
            body.extend(node.body)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
    return [m for m in dict.fromkeys(out) if m.split(".")[0] in WARM_PACKAGES]


def warm_for_script(path: str, backend: str | None = None) -> None:
    """Before the first launch of a script (`triton-dist run / explore / replay / predict /
    compare`): import in this process what its ranks will need, the backend's rank modules
    and the script's imports of WARM_PACKAGES, so the forked ranks start warm."""
    cls = _backend.backend_class(backend)
    if (cls, path) in _warmed:
        return
    cls.warm(script_imports(path))
    _warmed.add((cls, path))


def _refuse_inside_a_rank(fn, world_size) -> None:
    """launch() in a process that is already a rank (torchrun, `triton-dist run`, a rank of
    launch) would start a whole simulation of world_size ranks inside every rank (torchrun),
    or fail deep in multiprocess ("daemonic processes are not allowed to have children").
    A rank runs its code itself: say how."""
    if "RANK" not in os.environ:
        return
    name = getattr(fn, "__name__", "main")
    where = (f"rank {os.environ['RANK']} of {os.environ.get('WORLD_SIZE', '?')} "
             f"(started by torchrun, `triton-dist run` or triton_dist.launch: RANK is set)")
    raise TritonDistError(
        f"launch: this process is already {where}; launch(..., world_size={world_size!r}) here would "
        f"start a nested set of ranks inside every rank. Run the rank's code directly instead: end the "
        f"script with `sys.exit(triton_dist.main_or_launch({name}, world_size={world_size!r}))`, which "
        f"runs {name}() as this rank under torchrun / `triton-dist run` and launches {world_size!r} ranks "
        f"when started with plain python; or call triton_dist.init() and then {name}() yourself")


def hide_launch_frames(excinfo) -> bool:
    """pytest's __tracebackhide__ for launch() and the backend frames under it: a failed launch or
    a misuse it reports is shown at the user's call, its message saying where in the ranks it
    happened (pytest printed ~25 lines of launch()'s source before it); any other exception is
    a fault of ours and keeps its frames."""
    from .errors import LAUNCH_FAILURES, TritonDistError
    return excinfo.errisinstance((TritonDistError, *LAUNCH_FAILURES))


def main_or_launch(main, world_size=4) -> int:
    """For scripts: run `main` as this process's rank when started by torchrun or
    `triton-dist run` (RANK is set; the rank is initialized first, as `init()` does), else
    launch `world_size` ranks of it on this process's backend.  Returns an exit status: 0
    when every rank's `main` returned something true."""
    if "RANK" in os.environ:
        # what triton_dist.init() / finalize() do, through the backend module: the package's
        # __init__ imports this module, so importing those back would be an import cycle
        _backend.active().init()
        value = main()
        for rec in MAIN_VALUES:
            rec.append(value)
        _backend.active().finalize()
        return 0 if _true(value) else 1
    most = _backend.backend_class().max_ranks()
    if most is not None and 0 < most < world_size:
        print(f"[triton_dist] this machine runs {most} rank(s): running {most} instead of {world_size}",
              file=sys.stderr)
        world_size = most
    return 0 if all(_true(v) for v in launch(main, world_size=world_size).values) else 1


def _true(value) -> bool:
    """Did `main` succeed: a true value, or one with no single truth value (a tensor of many
    elements, as a script compared across backends returns)."""
    try:
        return bool(value)
    except (RuntimeError, ValueError, TypeError):
        return value is not None


# --- the skeleton shared by backends that fork their ranks --------------------------------------

def listen_socket() -> socket.socket:
    """A bound, listening socket on the loopback: rank 0 serves the rendezvous store on it."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    return listener


def fork_ranks(world_size, body, body_args, name="triton_dist-rank"):
    """Fork `world_size` ranks running body(rank, *body_args, conn); (processes, read pipes).
    `body` must end with report(conn, result)."""
    import multiprocess as mp
    ctx = mp.get_context("fork")
    procs, pipes = [], []
    me = os.getpid()
    try:
        for r in range(world_size):
            rd, wr = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_rank_start, name=f"{name}{r}", args=(me, body, r, *body_args, wr))
            p.daemon = True
            p.start()
            wr.close()
            procs.append(p)
            pipes.append(rd)
    except BaseException:
        teardown(procs, pipes, None)
        raise
    return procs, pipes


def _rank_start(launcher_pid, body, *args):
    """First thing in a forked rank, of every backend: die with the launcher (triton_dist/lifeline.py),
    and keep torch out of OpenMP.  GNU OpenMP does not survive fork: if the launching process ever ran
    a parallel torch op, a rank that enters an OpenMP region (a torch.zeros of 128 KiB will) hangs.
    One intra-op thread per rank avoids it (and N ranks on few cores gain nothing from more, which is
    why torchrun sets OMP_NUM_THREADS=1 too).  A launcher that never imported torch has no pool."""
    lifeline.die_with_parent(launcher_pid)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    body(*args)


def install_stack_dump() -> None:
    """`kill -USR1 <pid>` (and the launcher, on a timeout) prints every thread's Python stack to
    the real stderr (sys.stderr may be a capture without a file descriptor).

    A Python-level handler, not faulthandler: faulthandler walks the other threads' frames
    from a C signal handler while they run, and in ranks whose cores are busy that crashed
    the rank now and then ("Fatal Python error: Segmentation fault" in the middle of the
    dump).  This handler runs in the main thread with the GIL held, so the frames hold still."""
    try:
        signal.signal(signal.SIGUSR1, _print_stacks)
    except (ValueError, OSError):
        pass          # not the main thread: no stack dump, nothing else changes


def _print_stacks(signum, frame):
    import threading
    names = {t.ident: t.name for t in threading.enumerate()}
    out = [f"--- Python stacks of pid {os.getpid()} (SIGUSR1) ---"]
    for ident, f in sys._current_frames().items():
        out.append(f"Thread {names.get(ident, ident)} (most recent call last):")
        out.extend(line.rstrip("\n") for line in traceback.format_stack(f))
    try:
        sys.__stderr__.write("\n".join(out) + "\n")
        sys.__stderr__.flush()
    except (OSError, ValueError, AttributeError):
        pass


def pack_value(rank, value) -> bytes:
    """A rank's return value as the message the launcher reads (or the error saying why it can't be)."""
    import dill
    try:
        return dill.dumps(("ok", value))
    except Exception as e:  # noqa: BLE001
        return dill.dumps(("err", "PicklingError",
                           f"the return value of rank {rank} ({type(value).__name__}) cannot be sent back to the "
                           f"launcher: {e}. Return plain data (numbers, lists, tensors).", ""))


def pack_error(e: BaseException) -> bytes:
    """An exception raised in a rank as the message the launcher reads."""
    import dill
    if isinstance(e, DeadlockError):
        return dill.dumps(("deadlock", e.message, e.report))
    if isinstance(e, LaunchTimeoutError):
        return dill.dumps(("timeout", e.message, e.report))
    return dill.dumps(("err", type(e).__name__, str(e), traceback.format_exc()))


def report(conn, result: bytes) -> None:
    """Send a rank's outcome to the launcher and exit the rank at once (no teardown of
    torch, gloo or device state: the launcher needs only the result)."""
    try:
        conn.send_bytes(result)
        conn.close()
    finally:
        os._exit(0)


def teardown(procs, pipes, listener) -> None:
    """Kill the ranks still running, reap them all, close their pipes and the listener."""
    for p in procs:
        if p.is_alive():
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        p.join()
        p.close()                 # its sentinel fd now, not when a kept traceback lets go of it
    for c in pipes:
        c.close()
    if listener is not None:
        listener.close()


def rank_store(rank, world_size, listener, timeout):
    """The rendezvous store of a forked rank.  Rank 0 serves it on the socket the launcher
    bound before forking: the launcher itself never runs a store, so it has no c10d threads
    that a fork could catch holding a lock (that hung TCPStore clients in forked children)."""
    from torch.distributed import TCPStore
    lifeline.exit_if_orphaned()      # the store's own timeout bounds the wait below
    port = listener.getsockname()[1]
    if rank == 0:
        return TCPStore("127.0.0.1", port, world_size, is_master=True, wait_for_workers=False,
                        master_listen_fd=listener.fileno(), timeout=_td(timeout))
    listener.close()
    return TCPStore("127.0.0.1", port, world_size, is_master=False, timeout=_td(timeout))


def _td(seconds):
    import datetime
    return datetime.timedelta(seconds=max(30.0, float(seconds)))


def set_rank_environment(rank, world_size, backend_name) -> None:
    """What torchrun would set, so rank code written for torchrun works unchanged; and the
    rank's backend made this process's (the kernels it launches run there: compiled by
    Triton, or interpreted by the simulator), whatever the forking process used."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world_size), TRITON_DIST_BACKEND=backend_name)
    _backend.activate(backend_name)


def collect(procs, pipes, timeout, start, watchdog=None, left_out=None):
    """The ranks' outcomes in rank order; raises the first RankError/DeadlockError/
    LaunchTimeoutError.

    left_out: None, or a callable giving the seconds the timeout does not count (the ranks'
    launch checks: sim/launch.py, CheckSeconds).
    watchdog: None, or an object with `check(outcomes)` (called about every 0.1 s; raises
    DeadlockError when no rank can make progress) and `timeout_report()` (the report of a
    launch that timed out)."""
    from multiprocess import connection
    n = len(procs)
    outcomes = [None] * n
    by_obj = {}
    for r in range(n):
        by_obj[pipes[r]] = r
        by_obj[procs[r].sentinel] = r
    while any(o is None for o in outcomes):
        waiting_on = [pipes[r] for r in range(n) if outcomes[r] is None] + \
                     [procs[r].sentinel for r in range(n) if outcomes[r] is None]
        for obj in connection.wait(waiting_on, timeout=0.1):
            r = by_obj[obj]
            if outcomes[r] is not None:
                continue
            if obj is pipes[r]:
                try:
                    outcomes[r] = _load(r, pipes[r].recv_bytes())
                except (EOFError, OSError):
                    continue      # the sentinel will tell how it died
            else:
                if pipes[r].poll():
                    try:
                        outcomes[r] = _load(r, pipes[r].recv_bytes())
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
            if o[0] == "timeout":
                raise LaunchTimeoutError(o[1], o[2])
        if time.monotonic() - start - (left_out() if left_out else 0.0) > timeout:
            dump_stacks(procs, outcomes)
            if watchdog is None:
                late = ", ".join(str(r) for r, o in enumerate(outcomes) if o is None)
                raise LaunchTimeoutError(f"launch timed out after {timeout:g} s{_MORE_TIME}",
                                         f"ranks still running: {late} (their Python stacks are on stderr)")
            raise LaunchTimeoutError(f"launch timed out after {timeout:g} s{_MORE_TIME}", watchdog.timeout_report())
        if watchdog is not None:
            watchdog.check(outcomes)
    return outcomes


# What a timeout says to do (the ranks were not found stuck: they may only be slow).
_MORE_TIME = (" with ranks still running (no deadlock was detected: they may only be slow, or blocked "
              "where the simulator cannot tell, e.g. in host code); give them more time with "
              "launch(..., timeout=SECONDS) or `--timeout SECONDS`, or see below where each rank was")


def _load(rank, data: bytes):
    """A rank's message, or the error saying its return value cannot be loaded here."""
    import dill
    try:
        return dill.loads(data)
    except Exception as e:  # noqa: BLE001 - whatever unpickling runs, name the rank
        return ("err", "UnpicklingError",
                f"the return value of rank {rank} could not be unpickled in the launcher "
                f"({type(e).__name__}: {e}). Return plain data (numbers, lists, dicts, tensors), or objects "
                f"of classes the launching process can import and rebuild", "")


def dump_stacks(procs, outcomes):
    """Ask the ranks still running to print their Python stacks (to stderr) before teardown."""
    for r, p in enumerate(procs):
        if outcomes[r] is None and p.is_alive():
            try:
                os.kill(p.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
    time.sleep(1.0)           # the handler runs when the rank's main thread next runs Python (waits poll at 0.5 s)


def values_of(outcomes) -> list:
    return [rest[0] for _, *rest in outcomes]
