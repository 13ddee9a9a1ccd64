"""The event log of a deterministic failure and the trace show what happened (issue 24 item 3).

Before: the log omitted when a store in flight lands, showed 0 for every load value, named
addresses "heap of rank 1 + 66048" where reports say "symm tensor #0 (...) of rank 1,
element 0", labelled a core's end-of-kernel drain `<host>`; the trace had no store issue,
0 as a satisfied wait's `seen`, and no link from a signal to the wait it released.  The
oracle: the kernel's own data (src = 1..N, doubled by rank 1), its source lines, and the
Chrome trace format's flow events (ph "s"/"f" with one id).
"""
import json

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm

N = 16


@triton.jit
def handoff(data, sig, src, N: tl.constexpr):
    offs = tl.arange(0, N)
    if dl.rank() == 0:
        tl.store(dl.symm_at(data, 1) + offs, tl.load(src + offs))      # to the peer, in flight
        shm.fence()
        dl.notify(sig, 1, signal=1, sig_op="set")
    else:
        dl.wait(sig, 1, "sys", "acquire", waitValue=1)
        x = tl.load(data + offs)
        tl.store(data + offs, x * 2)                                    # lands in the kernel-end drain


def _handoff(fail):
    data = triton_dist.symm_tensor((N,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    src = torch.arange(N, dtype=torch.float32) + 1
    triton_dist.barrier()
    handoff[(1,)](data, sig, src, N=N)
    if triton_dist.rank() == 1:
        assert torch.equal(data, 2 * src), data.tolist()
        if fail:
            raise RuntimeError("stop, for the event log")
    return True


def _line(text):
    import inspect
    lines, start = inspect.getsourcelines(handoff.fn)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


def _events(monkeypatch, seed):
    from triton_dist.sim import launch as L
    monkeypatch.setitem(L.SESSION, "events", 4000)
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_handoff, True, world_size=2, schedule="pct", seed=seed, timeout=60)
    return ei.value.events.splitlines()


@pytest.mark.parametrize("seed", [0, 5])
def test_the_event_log_shows_landings_values_names_and_drains(monkeypatch, seed):
    log = _events(monkeypatch, seed)
    store, drain_store = _line("tl.store(dl.symm_at"), _line("tl.store(data + offs")
    data = "symm tensor #0 (float32[16]) of rank 1, element 0 ('data' allocated at test_event_log.py:"
    lands = [ln for ln in log if "store lands" in ln]
    # rank 0's store to the peer lands, named where it was issued, with the value it wrote (src[0] = 1)
    assert any("rank 0 core 0" in ln and f"test_event_log.py:{store} (handoff) (issued there)" in ln
               and data in ln and ln.endswith("saw 1") for ln in lands), "\n".join(log)
    # rank 1's doubling lands too (2 * 1), in the drain at its kernel's end, labelled by its core
    assert any("rank 1 core 0" in ln and f"test_event_log.py:{drain_store} (handoff)" in ln and ln.endswith("saw 2")
               for ln in lands), "\n".join(lands)
    assert any("rank 1 core 0" in ln and "dma drain" in ln and "end of handoff (core 0)" in ln for ln in log)
    # the load read what the store delivered; the wait's poll saw the signal's 1
    assert any("rank 1 core 0" in ln and f"test_event_log.py:{_line('x = tl.load')}" in ln and " load " in ln
               and ln.endswith("saw 1") for ln in log), "\n".join(log)
    wait = _line("dl.wait(sig")
    assert any("rank 1 core 0" in ln and "scalar load" in ln and f"test_event_log.py:{wait}" in ln
               and ln.endswith("saw 1") for ln in log)
    # the store's own record (its issue) shows what it stores
    assert any("rank 0 core 0" in ln and " store " in ln and f"test_event_log.py:{store} (handoff)" in ln
               and "(issued there)" not in ln and ln.endswith("saw 1") for ln in log), "\n".join(log)
    assert not any("heap of rank" in ln for ln in log)
    assert not any("<host>" in ln for ln in log)


@pytest.mark.parametrize("schedule,seed", [("pct", 0), ("free", None)])
def test_the_trace_links_each_signal_to_its_wait_and_shows_stores_issued_and_landed(tmp_path, schedule, seed):
    path = tmp_path / "t.json"
    triton_dist.launch(_handoff, False, world_size=2, schedule=schedule, seed=seed, trace=str(path), timeout=60)
    ev = json.loads(path.read_text())["traceEvents"]
    starts = [e for e in ev if e["ph"] == "s" and e["name"] == "signal"]
    ends = [e for e in ev if e["ph"] == "f" and e["name"] == "signal"]
    (s,) = [e for e in starts if e["pid"] == 0]                  # rank 0's notify ...
    assert any(f["id"] == s["id"] and f["pid"] == 1 and f["ts"] >= s["ts"] for f in ends), (starts, ends)   # ... to rank 1's wait
    issued = [e for e in ev if e["name"] == "store issued"]
    landed = [e for e in ev if e["name"] == "store lands"]
    assert {(e["pid"], e["args"]["value"]) for e in issued} == {(0, 1.0), (1, 2.0)}
    assert {(e["pid"], e["args"]["value"]) for e in landed} == {(0, 1.0), (1, 2.0)}
    assert all(e["args"]["target"].startswith("symm tensor #0 (float32[16]) of rank 1, element")
               for e in issued + landed)
    waits = [e for e in ev if e["ph"] == "E" and e["name"] == "wait"]
    assert all(e["args"]["seen"] == 1 for e in waits)            # a satisfied wait shows what satisfied it
