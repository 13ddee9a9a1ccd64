"""Fault injection: whatever dies or hangs, every way out ends in a report and nothing survives.

- the launcher is SIGKILLed or SIGTERMed while its ranks run (free and pct): no rank is
  alive 10 s later (PR_SET_PDEATHSIG + parent checks at every blocking point);
- a pytest-xdist worker crashes while its ranks run: the session still ends;
- an endless host loop and an endless kernel: a timeout report, no process left;
- a rank killed inside init under torchrun: nothing left in /dev/shm.
Process trees are found by scanning /proc/*/stat for parent pids (no psutil).
"""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import dev_shm
import triton
import triton.language as tl

import triton_dist

ROOT = Path(__file__).resolve().parent.parent


# ---- /proc helpers ------------------------------------------------------------------------------

def _stat(pid):
    """(state, ppid) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2:].split()
    return rest[0], int(rest[1])


def _alive(pid) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")     # a zombie is dead (init may not reap it)


def descendants(pid) -> set:
    """Every live process below pid."""
    parent_of = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st[0] not in ("Z", "X"):
                parent_of[int(name)] = st[1]
    found, frontier = set(), {pid}
    while frontier:
        kids = {p for p, pp in parent_of.items() if pp in frontier and p not in found}
        found |= kids
        frontier = kids
    return found


def _wait_gone(pids, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(_alive(p) for p in pids):
            return set()
        time.sleep(0.1)
    return {p for p in pids if _alive(p)}


def _kill_all(pids):
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _env(**extra):
    return dict(os.environ, TRITON_DIST_BACKEND="sim", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), **extra)


# ---- the launcher dies --------------------------------------------------------------------------

LAUNCHER = """
import os, sys, time
import triton_dist

def body(ready):
    open(os.path.join(ready, f"rank{triton_dist.rank()}"), "w").write(str(os.getpid()))
    triton_dist.barrier()          # under pct: one rank then sleeps holding the baton, the other
    time.sleep(600)                # waits on the schedule's semaphore

triton_dist.launch(body, sys.argv[1], world_size=2, schedule=sys.argv[2], timeout=600)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("schedule", ["free", "pct"])
def test_ranks_die_with_their_launcher(tmp_path, schedule, sig):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    p = subprocess.Popen([sys.executable, str(script), str(tmp_path), schedule], env=_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ranks = set()
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and not all((tmp_path / f"rank{r}").exists() for r in (0, 1)):
            assert p.poll() is None, p.stderr.read().decode()
            time.sleep(0.1)
        time.sleep(0.5)                # both ranks past the barrier: one sleeping, one blocked
        ranks = descendants(p.pid)
        assert len(ranks) >= 2, ranks
        p.send_signal(sig)
        p.wait(timeout=30)
        left = _wait_gone(ranks, 10)
        assert not left, f"ranks still alive 10 s after the launcher got {sig.name}: {sorted(left)}"
    finally:
        p.kill()
        p.wait()
        p.stderr.close()
        _kill_all(ranks)


# ---- an xdist worker crashes ---------------------------------------------------------------------

CRASHING_TESTS = """
import os, signal, threading, time
import triton_dist

def _sleep():
    time.sleep(600)

def test_crash_while_ranks_run():
    threading.Timer(3, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
    triton_dist.launch(_sleep, world_size=2, timeout=600)

def test_exits_while_ranks_run():
    threading.Timer(3, lambda: os._exit(3)).start()
    triton_dist.launch(_sleep, world_size=2, timeout=600)

def test_fine():
    assert triton_dist.launch(lambda: 1, world_size=2).values == [1, 1]
"""


def test_crashing_xdist_worker_ends_the_session(tmp_path):
    (tmp_path / "test_crashing.py").write_text(CRASHING_TESTS)
    (tmp_path / "conftest.py").write_text("import triton_dist  # noqa: F401\n")
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "xdist", "-p", "no:cacheprovider",
                          "--rootdir", str(tmp_path), str(tmp_path / "test_crashing.py")],
                         cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        left = descendants(p.pid)
        os.killpg(p.pid, signal.SIGKILL)
        _kill_all(left)
        out, _ = p.communicate()
        pytest.fail("the pytest session did not end after its workers crashed:\n" + out.decode()[-3000:])
    text = out.decode()
    assert "crashed" in text and "1 passed" in text, text[-3000:]


# ---- endless host loop, endless kernel: a timeout report, nothing left ----------------------------

def _endless_host():
    while True:
        pass


@triton.jit
def endless_kernel(p):
    x = tl.load(p)
    while x >= 0:               # not a wait: the core stores every round, forever
        tl.store(p, x + 1)
        x = tl.load(p) % 1000


def _endless_kernel():
    buf = triton_dist.symm_tensor((16,), torch.int32)
    endless_kernel[(1,)](buf)


@pytest.mark.parametrize("schedule", ["free", "pct"])
@pytest.mark.parametrize("body", [_endless_host, _endless_kernel], ids=["host", "kernel"])
def test_endless_loop_ends_in_a_timeout_report(body, schedule, capfd):
    before = dev_shm.ours()
    t = time.monotonic()
    with pytest.raises(triton_dist.LaunchTimeoutError, match="timed out after 3 s") as ei:
        triton_dist.launch(body, world_size=2, schedule=schedule, seed=1, timeout=3)
    assert time.monotonic() - t < 120          # the loops are endless: the timeout ended them
    assert isinstance(ei.value, TimeoutError) and not isinstance(ei.value, triton_dist.DeadlockError)
    assert "rank" in str(ei.value)            # the report names the ranks still running
    # every rank printed its threads' stacks, and printing them crashed none (faulthandler's
    # all-thread dump did, now and then, while the cores ran)
    err = capfd.readouterr().err
    assert err.count("--- Python stacks of pid") == 2, err[-3000:]
    assert "Fatal Python error" not in err, err[-3000:]
    left = descendants(os.getpid())
    assert not left, f"processes left after the launch: {[(p, _stat(p)) for p in left]}"
    assert dev_shm.ours() <= before, dev_shm.ours() - before


# ---- a kept exception holds nothing --------------------------------------------------------------

def _mapped_bytes() -> int:
    total = 0
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = line.split()[0].split("-")
            total += int(hi, 16) - int(lo, 16)
    return total


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _raises():
    raise ValueError("kept")


def _deadlocks():
    sig = triton_dist.symm_tensor((16,), torch.int32)
    endless_wait[(1,)](sig)


@triton.jit
def endless_wait(sig):
    import triton_dist.language as dl
    dl.wait(sig, 1, "gpu", "acquire", waitValue=1)


@pytest.mark.parametrize("body,error", [(_raises, triton_dist.RankError), (_deadlocks, triton_dist.DeadlockError)],
                         ids=["RankError", "DeadlockError"])
def test_kept_errors_pin_no_memory_and_no_fds(body, error):
    import gc

    from triton_dist.sim import heap

    def failure():
        try:
            triton_dist.launch(body, world_size=2, schedule="pct", seed=3, timeout=120)
        except error as e:
            return e
        pytest.fail("the launch did not fail")

    kept = [failure()]                  # warm-up: imports, caches
    gc.collect()
    mapped, fds = _mapped_bytes(), _open_fds()
    kept += [failure() for _ in range(4)]
    gc.collect()
    grown = _mapped_bytes() - mapped
    # each launch maps 2 heaps of heap_bytes(): 4 kept errors pinning them would add 8
    assert grown < heap.heap_bytes(), f"{len(kept) - 1} kept errors pin {grown >> 20} MiB of mappings"
    assert _open_fds() <= fds, f"{len(kept) - 1} kept errors pin {_open_fds() - fds} file descriptors"
    assert all(isinstance(e, error) and e.seed == 3 for e in kept)   # the errors themselves stay whole


# ---- torchrun: a rank dies inside init -------------------------------------------------------------

DIES_IN_INIT = """
import os, signal
import triton_dist
from triton_dist.sim import heap

# rank 1 is SIGKILLed right after it made its heap segment, before its peers have mapped it
_create = heap.create_named
def _create_then_die(*args, **kwargs):
    made = _create(*args, **kwargs)
    if os.environ["RANK"] == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    return made
heap.create_named = _create_then_die
triton_dist.init()
"""


FAKE_TAG = dev_shm.PLANTED_TAG  # the segments test_init_sweeps_segments_of_dead_processes plants


def _tdist_segments():
    # the planted segments are not this test's: under xdist that test may run alongside
    return {n for n in os.listdir("/dev/shm") if n.startswith("tdist-") and FAKE_TAG not in n}


def test_rank_killed_inside_init_under_torchrun_leaves_nothing(tmp_path):
    script = tmp_path / "dies_in_init.py"
    script.write_text(DIES_IN_INIT)
    before = _tdist_segments()
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", str(script)],
                       capture_output=True, text=True, timeout=120, env=_env(TORCHELASTIC_ERROR_FILE=""))
    assert p.returncode != 0, p.stdout + p.stderr          # the rank did die
    assert "SIGKILL" in p.stdout + p.stderr or "Signal 9" in p.stdout + p.stderr, p.stderr[-2000:]
    left = _tdist_segments() - before
    assert not left, f"left in /dev/shm: {sorted(left)}"


def test_init_sweeps_segments_of_dead_processes(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = Path("/dev/shm") / f"tdist-{FAKE_TAG}-r0-p{dead}"      # what a killed rank left behind
    live = Path("/dev/shm") / f"tdist-{FAKE_TAG}-r1-p{os.getpid()}"  # a running rank's: kept
    stale.write_bytes(b"\0" * 4096)
    live.write_bytes(b"\0" * 4096)
    try:
        p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
                            str(ROOT / "examples" / "hello_allgather.py")],
                           capture_output=True, text=True, timeout=120, env=_env())
        assert p.returncode == 0, p.stdout + p.stderr
        assert not stale.exists(), "init left the segment of a dead process in /dev/shm"
        assert live.exists(), "init removed the segment of a live process"
    finally:
        for f in (stale, live):
            f.unlink(missing_ok=True)
