"""sim/affinity.py: a deterministic kernel's core threads keep to one CPU on a quiet machine,
and are left to the OS on a busy one, with one core, or when switched off.  The oracle is the
operating system's own word (os.sched_getaffinity of the thread)."""
import os
import threading

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
from triton_dist.sim import affinity

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                                reason="needs a Linux machine with at least 2 usable CPUs")


def _in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_a_quiet_machine_pins_the_core_threads_to_one_usable_cpu(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.delenv(affinity.ENV, raising=False)
    cpu = affinity.kernel_cpu(4)
    assert cpu in os.sched_getaffinity(0)

    def pinned():
        affinity.pin(cpu)
        return os.sched_getaffinity(0)
    assert _in_thread(pinned) == {cpu}
    assert len(os.sched_getaffinity(0)) >= 2        # the calling thread is untouched


@pytest.mark.parametrize("why", ["busy", "one core", "switched off"])
def test_no_pinning_when_it_cannot_help(monkeypatch, why):
    load = float(len(os.sched_getaffinity(0))) if why == "busy" else 0.0
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    if why == "switched off":
        monkeypatch.setenv(affinity.ENV, "0")
    assert affinity.kernel_cpu(1 if why == "one core" else 4) is None
    before = os.sched_getaffinity(0)

    def untouched():
        affinity.pin(None)
        return os.sched_getaffinity(0)
    assert _in_thread(untouched) == before


@triton.jit
def _ring_add(x, out):
    pid = tl.program_id(0)
    r = tl.arange(0, 16)
    tl.store(out + pid * 16 + r, tl.load(x + pid * 16 + r) + tl.load(x + ((pid + 1) % 4) * 16 + r))


def _four_programs():
    x = torch.arange(64, dtype=torch.float32)
    out = torch.zeros(64, dtype=torch.float32)
    _ring_add[(4,)](x, out)
    return out


@pytest.mark.parametrize("schedule", ["random", "pct"])
def test_pinning_changes_no_schedule(monkeypatch, schedule):
    """The same seed takes the same decisions pinned or not, and computes what torch does."""
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))     # inherited by the forked ranks
    x = torch.arange(64, dtype=torch.float32)
    want = x + torch.roll(x.view(4, 16), -1, 0).reshape(-1)
    runs = {}
    for pin in ("1", "0"):
        monkeypatch.setenv(affinity.ENV, pin)
        res = triton_dist.launch(_four_programs, world_size=1, schedule=schedule, seed=5, timeout=120)
        assert torch.equal(res.values[0], want)
        runs[pin] = res.schedule_digest
    assert runs["1"] == runs["0"] and runs["1"]
