"""The access path hands every access to the rank's subscribers (sim/access.py, sim/observers.py).

Oracle: the kernels below touch addresses and values computed here from the tensors'
data pointers and torch (never from the simulator's own records), and docs/device_model.md
says which route each access takes: a scalar tl.load through the data cache, a tl.store a
DMA in flight under the ascend models that lands later, everything straight to memory
under `coherent`.
"""
import torch
import triton
import triton.language as tl

import triton_dist

N = 8


@triton.jit
def touch(x, y, flag, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y + offs, tl.load(x + offs) * 2.0)        # a block load, a block store
    f = tl.load(flag)                                   # a scalar load
    tl.store(flag + 1, f + 5)                           # a scalar store
    tl.atomic_add(flag + 2, 3, sem="relaxed")           # an atomic


class Recorder:
    """A subscriber: what the access path hands it, in plain Python values."""

    def __init__(self):
        self.seen = []

    def access(self, a):
        if a.origin == "kernel":
            self.seen.append(("access", a.kind, a.route, a.scalar, a.lo, a.hi, [int(v) for v in a.addrs],
                              [float(v) for v in a.values()] if a.kind != "atomic" else
                              [int(v) for v in a.read.values()], a.where().split(" ")[0]))

    def landed(self, a):
        self.seen.append(("landed", a.kind, a.lo, a.hi))


def _run():
    from triton_dist.sim import context, observers
    rt = context.runtime()
    rec = Recorder()
    observers.subscribe(rt, rec)
    x = torch.arange(N, dtype=torch.float32) + 1
    y = torch.zeros(N, dtype=torch.float32)
    flag = torch.tensor([7, 0, 10], dtype=torch.int32)
    touch[(1,)](x, y, flag, N=N)
    return rec.seen, x.data_ptr(), y.data_ptr(), flag.data_ptr(), y.tolist(), flag.tolist()


def _line_of(text):
    import inspect
    src, first = inspect.getsourcelines(touch.fn)
    return f"test_observers.py:{first + next(i for i, s in enumerate(src) if text in s)}"


def test_every_access_reaches_a_subscriber_with_its_route_addresses_and_values():
    seen, xp, yp, fp, y, flag = triton_dist.launch(_run, world_size=1).values[0]
    assert y == [2.0 * (i + 1) for i in range(N)] and flag == [7, 12, 13]      # torch's arithmetic
    accesses = [s for s in seen if s[0] == "access"]
    want = [
        ("access", "load", "memory", False, xp, xp + 4 * N, [xp + 4 * i for i in range(N)],
         [float(i + 1) for i in range(N)], _line_of("tl.store(y + offs")),
        ("access", "store", "dma", False, yp, yp + 4 * N, [yp + 4 * i for i in range(N)],
         [2.0 * (i + 1) for i in range(N)], _line_of("tl.store(y + offs")),
        ("access", "load", "cache", True, fp, fp + 4, [fp], [7.0], _line_of("f = tl.load(flag)")),
        ("access", "store", "dma", True, fp + 4, fp + 8, [fp + 4], [12.0], _line_of("tl.store(flag + 1")),
        ("access", "atomic", "memory", False, fp + 8, fp + 12, [fp + 8], [10], _line_of("tl.atomic_add")),
    ]
    assert accesses == want
    # both stores were in flight and landed, each after its own issue, before the kernel ended
    landed = [s for s in seen if s[0] == "landed"]
    assert sorted(landed) == sorted([("landed", "store", yp, yp + 4 * N), ("landed", "store", fp + 4, fp + 8)])
    for lo in (yp, fp + 4):
        issued = next(i for i, s in enumerate(seen) if s[0] == "access" and s[1] == "store" and s[4] == lo)
        assert seen.index(next(s for s in landed if s[2] == lo)) > issued


def test_coherent_memory_performs_stores_at_once():
    seen, *_ = triton_dist.launch(_run, world_size=1, memory_model="coherent").values[0]
    routes = [(s[1], s[2]) for s in seen if s[0] == "access"]
    assert routes == [("load", "memory"), ("store", "memory"), ("load", "memory"), ("store", "memory"),
                      ("atomic", "memory")]
    assert not [s for s in seen if s[0] == "landed"]


def _nobody():
    from triton_dist.sim import context
    x = torch.ones(N)
    y = torch.zeros(N)
    flag = torch.zeros(3, dtype=torch.int32)
    touch[(1,)](x, y, flag, N=N)
    rt = context.runtime()
    return rt.access_observers is None, [type(s).__name__ for s in rt.observers.subscribers], y.tolist()


def test_nothing_subscribed_to_accesses_is_the_fast_path():
    # the device watch (sim/evidence/watch.py) is on every rank, but takes no access events:
    # the access path builds no Access for a load and calls nobody
    no_access_bus, subscribers, y = triton_dist.launch(_nobody, world_size=1).values[0]
    assert no_access_bus and subscribers == ["DeviceWatch"] and y == [2.0] * N


def test_the_trace_shows_each_store_landing(tmp_path):
    import json
    path = tmp_path / "t.json"
    triton_dist.launch(_nobody, world_size=1, trace=str(path))
    lands = [e for e in json.loads(path.read_text())["traceEvents"] if e["name"].endswith("store lands")]
    assert sorted(e["name"] for e in lands) == ["scalar store lands", "store lands"]
    assert all(e["args"]["issued_at"].startswith("test_observers.py:") for e in lands)
    assert {e["args"]["bytes"] for e in lands} == {4, 4 * N}
