"""Performance prediction (issue 17, sim/predict): the model on tiny kernels whose times are
worked out by hand from the profile numbers written in this file, not from the model's code.

The profile `_profile(...)` below: 2 cube + 2 vector cores, launch 10 us, HBM 4.096 GB/s per
core (1 us per 4 KiB), no link or signal contention, signal latency 1 us.  Each test states
its oracle as arithmetic on those numbers.
"""
import json

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.errors import TritonDistError

US = 1e-6
LAUNCH = 10 * US
BW = 4.096e9            # bytes/s: 4096 bytes take 1 us
SIG = 1 * US
POLL = 0.1 * US
FLOPS = 6.5536e10       # fp32 cube FLOP/s of the whole device (2 cube cores, efficiency 1)


def _v(x, why="test profile"):
    return {"value": x, "source": f"assumed: {why}"}


def _profile(tmp_path, **over):
    doc = {
        "name": "test",
        "cores": {"cube": _v(2), "vector": _v(2)},
        "cube_flops": {d: _v(FLOPS) for d in ("bf16", "fp16", "tf32", "fp32")},
        "dot_efficiency": _v(1.0),
        "hbm": {"bandwidth_Bps": _v(2 * BW), "core_bandwidth_Bps": _v(BW), "latency_s": _v(0.5 * US)},
        "l2": {"bandwidth_Bps": _v(1e15), "core_bandwidth_Bps": _v(1e15)},
        "link": {"bandwidth_Bps": _v(1e15), "core_store_bandwidth_Bps": _v(BW), "core_put_bandwidth_Bps": _v(BW),
                 "latency_s": _v(0.5 * US)},
        "signal": {"latency_s": _v(SIG), "local_latency_s": _v(SIG), "poll_s": _v(POLL)},
        "atomic": {"local_latency_s": _v(SIG), "remote_latency_s": _v(2 * SIG)},
        "launch": {"device_s": _v(LAUNCH), "host_per_call_s": _v(100 * US)},
        "pipeline_stages": _v(1),
    }
    for path, value in over.items():
        node = doc
        *head, last = path.split(".")
        for h in head:
            node = node[h]
        node[last] = _v(value)
    p = tmp_path / "test.json"
    p.write_text(json.dumps(doc))
    return str(p)


@triton.jit
def copy_kernel(x, y, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    tl.store(y + offs, tl.load(x + offs))


def _copy(programs, n):
    x = torch.ones(programs * n)
    y = torch.zeros(programs * n)
    copy_kernel[(programs,)](x, y, N=n)
    return y.sum().item()


def test_pure_copy_is_bound_by_bandwidth(tmp_path):
    prof = _profile(tmp_path)
    for n in (1024, 4096):                       # 4 and 16 KiB each way
        res = triton_dist.launch(_copy, 1, n, world_size=1, predict=prof)
        assert res.values == [n]
        # load: latency 0.5 us + 4n bytes at 1 us per 4096 B; store: posted, 4n bytes likewise
        want = LAUNCH + 0.5 * US + 2 * (4 * n / BW)
        got = res.prediction.launches[0].us * US
        assert got == pytest.approx(want, rel=1e-9)
        assert res.prediction.launches[0].busiest_pipe == "mte"


def test_programs_beyond_the_cores_queue_for_a_core(tmp_path):
    prof = _profile(tmp_path)
    n = 1024
    one = LAUNCH + 0.5 * US + 2 * (4 * n / BW)   # one program alone (the copy test's oracle)
    res = triton_dist.launch(_copy, 4, n, world_size=1, predict=prof)
    lp = res.prediction.launches[0]
    assert (lp.programs, lp.cores) == (4, 2)
    # two vector cores, HBM wide enough for both: programs 2 and 3 start when 0 and 1 end
    assert lp.us * US == pytest.approx(LAUNCH + 2 * (one - LAUNCH), rel=1e-9)


@triton.jit
def dot_kernel(a, b, c, M: tl.constexpr):
    r = tl.arange(0, M)
    at = tl.load(a + r[:, None] * M + r[None, :])
    bt = tl.load(b + r[:, None] * M + r[None, :])
    tl.store(c + r[:, None] * M + r[None, :], tl.dot(at, bt, input_precision="ieee"))


def _dot(m):
    a = torch.randn(m, m, generator=torch.Generator().manual_seed(0))
    b = torch.randn(m, m, generator=torch.Generator().manual_seed(1))
    c = torch.zeros(m, m)
    dot_kernel[(1,)](a, b, c, M=m)
    return torch.allclose(c, a @ b, atol=1e-3)


def test_pure_dot_is_bound_by_flops(tmp_path):
    prof = _profile(tmp_path)
    res = triton_dist.launch(_dot, 64, world_size=1, predict=prof)
    assert res.values == [True]
    flops = 2 * 64 * 64 * 64
    # operand loads feed the dot: from L2 (1e15 B/s, ~0), the first after 0.5 us latency, the
    # second streaming right behind it (latency hidden); the dot: flops at FLOPS / 2 cube cores
    # (16 us); the store: 16 KiB
    want = LAUNCH + 0.5 * US + 2 * (64 * 64 * 4 / 1e15) + flops / (FLOPS / 2) + 64 * 64 * 4 / BW
    lp = res.prediction.launches[0]
    assert lp.us * US == pytest.approx(want, rel=1e-9)
    assert lp.busiest_pipe == "cube"          # 16 us of dot against 1 + 4 us of loads and store


@triton.jit
def ping_pong_kernel(ping, pong, ROUNDS: tl.constexpr):
    me = dl.rank()
    for i in range(1, ROUNDS + 1):
        if me == 0:
            dl.notify(ping, 1, signal=i, sig_op="set")
            dl.wait(pong, 1, "sys", "acquire", waitValue=i)
        else:
            dl.wait(ping, 1, "sys", "acquire", waitValue=i)
            dl.notify(pong, 0, signal=i, sig_op="set")


def _ping_pong(rounds):
    ping = triton_dist.symm_tensor((16,), torch.int32)
    pong = triton_dist.symm_tensor((16,), torch.int32)
    ping_pong_kernel[(1,)](ping, pong, ROUNDS=rounds)
    return (ping if triton_dist.rank() == 1 else pong)[0].item()


def test_ping_pong_is_bound_by_signal_latency(tmp_path):
    prof = _profile(tmp_path)
    for rounds in (3, 7):
        res = triton_dist.launch(_ping_pong, rounds, world_size=2, predict=prof)
        assert res.values == [rounds, rounds]
        # every round is two one-way signal latencies; nothing else costs time
        assert res.prediction.launches[0].us * US == pytest.approx(LAUNCH + 2 * rounds * SIG, rel=1e-9)


@triton.jit
def chain_kernel(x, y, sig, N: tl.constexpr):
    offs = tl.arange(0, N)
    if dl.rank() == 0:
        tl.store(y + offs, tl.load(x + offs))            # the producer's work
        dl.notify(sig, 1, signal=7, sig_op="set")
    else:
        dl.wait(sig, 1, "sys", "acquire", waitValue=7)
        tl.store(y + offs, tl.zeros((N,), tl.float32) + 1.0)


def _chain(n):
    x = torch.ones(n)
    y = torch.zeros(n)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    triton_dist.barrier()
    chain_kernel[(1,)](x, y, sig, N=n)
    return y.sum().item()


def test_a_wait_ends_when_the_producer_set_is_seen(tmp_path):
    prof = _profile(tmp_path)
    n = 4096
    res = triton_dist.launch(_chain, n, world_size=2, predict=prof)
    assert res.values == [n, n]
    lp = res.prediction.launches[0]
    producer = LAUNCH + 0.5 * US + 2 * (4 * n / BW)      # rank 0: the copy, then its SET
    consumer = producer + SIG + 4 * n / BW               # rank 1: sees the SET, then its store
    assert lp.rank_us[0] * US == pytest.approx(producer, rel=1e-9)
    assert lp.rank_us[1] * US == pytest.approx(consumer, rel=1e-9)
    assert lp.us * US == pytest.approx(consumer, rel=1e-9)
    assert lp.wait_us * US == pytest.approx(producer + SIG - LAUNCH, rel=1e-9)
    # the critical path starts on the producer and crosses to the consumer
    assert lp.critical_path[0].startswith("rank 0") and lp.critical_path[-1].startswith("rank 1")


def _library():
    from triton_dist import kernels
    x = torch.arange(3000, dtype=torch.float32) + triton_dist.rank()
    y = kernels.all_gather(x)
    z = kernels.all_reduce(x, method="ring")
    return y.sum().item() + z.sum().item()


def test_same_seed_same_prediction():
    runs = [triton_dist.launch(_library, world_size=2, schedule="pct", seed=11, predict="atlas-a2")
            for _ in range(2)]
    a, b = ([(x.kernel, x.us, x.wait_us, x.busiest_pipe) for x in r.prediction.launches] for r in runs)
    assert a == b and len(a) == 2
    assert runs[0].values == runs[1].values


def test_race_check_and_prediction_together():
    alone = triton_dist.launch(_library, world_size=2, schedule="pct", seed=11, predict="atlas-a2")
    both = triton_dist.launch(_library, world_size=2, schedule="pct", seed=11, predict="atlas-a2",
                              race_check=True)
    assert both.races == []
    assert [x.us for x in both.prediction.launches] == [x.us for x in alone.prediction.launches]


def test_trace_and_table(tmp_path):
    res = triton_dist.launch(_chain, 256, world_size=2, predict=_profile(tmp_path))
    out = tmp_path / "t.json"
    assert res.prediction.write_trace(str(out)) > 0
    doc = json.loads(out.read_text())
    spans = [e for e in doc["traceEvents"] if e.get("cat") == "program"]
    assert {e["pid"] for e in spans} == {0, 1}
    assert max(e["ts"] + e["dur"] for e in spans) == pytest.approx(res.prediction.launches[0].us)
    assert "chain_kernel" in res.prediction.table()


def test_unknown_device_names_the_known_ones():
    with pytest.raises(TritonDistError) as e:
        triton_dist.launch(_copy, 1, 16, world_size=1, predict="a100")
    assert "unknown device 'a100'" in str(e.value)
    assert "atlas-a2" in str(e.value) and "h200-nvlink" in str(e.value)


def test_profile_numbers_must_cite_a_source(tmp_path):
    from triton_dist.sim.predict import load
    p = _profile(tmp_path)
    doc = json.loads(open(p).read())
    doc["hbm"]["bandwidth_Bps"] = {"value": 1e12}
    open(p, "w").write(json.dumps(doc))
    with pytest.raises(TritonDistError, match="hbm.bandwidth_Bps"):
        load(p)
    for name in ("h200-nvlink", "atlas-a2"):
        assert load(name).sources                 # the shipped profiles load, every number cited


def test_only_the_simulator_takes_predict():
    with pytest.raises(TritonDistError, match="backend 'cuda' does not take predict"):
        triton_dist.launch(_copy, 1, 16, world_size=1, backend="cuda", predict="h200-nvlink")


def test_predict_runs_upstream_host_code_through_the_compat_layer(capsys):
    # upstream's test_my_pe as written (import shmem, hccl, .npu()): predicted like any script,
    # one table row per kernel it launches (add_my_pe, add_num_ranks) on the profile's cores
    import os

    from triton_dist.cli import main
    script = os.path.join(os.path.dirname(__file__), "upstream_scenarios", "my_pe.py")
    assert main(["predict", "-n", "2", "--device", "atlas-a2", "--shmem-compat", script]) == 0
    out = capsys.readouterr().out
    assert "predicted on atlas-a2" in out
    assert "add_my_pe" in out and "add_num_ranks" in out


def _nesting_faults(events):
    """Slices ('X') on one track (pid, tid) that overlap without one containing the other: a
    trace viewer (Chrome's trace format, Perfetto) requires the slices of a track to nest."""
    by_track = {}
    for e in events:
        if e.get("ph") == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    eps = 1e-6                                        # us: float rounding of the same instant
    faults = []
    for track, spans in by_track.items():
        stack = []
        for s, e, name in sorted(spans, key=lambda x: (x[0], -x[1])):
            while stack and s >= stack[-1][1] - eps:
                stack.pop()
            if stack and e > stack[-1][1] + eps:
                faults.append((track, stack[-1], (s, e, name)))
            stack.append((s, e, name))
    return faults


MIXED_PIPES = """
import sys, torch, triton, triton.language as tl
import triton_dist, triton_dist.language as dl

@triton.jit
def mix_kernel(x, y, N: tl.constexpr):
    peer = (dl.rank() + 1) % dl.num_ranks()
    a = tl.load(x + tl.arange(0, N))                            # local (mte), short
    b = tl.load(dl.symm_at(x, peer) + tl.arange(0, 4 * N))      # a peer's (link), beside it
    c = tl.load(x + tl.arange(0, 64 * N))                       # local again: after the first, past the second
    tl.store(y + tl.arange(0, N), a + tl.sum(b) + tl.sum(c))

def main():
    x = triton_dist.symm_tensor((64 * 1024,), torch.float32)
    y = triton_dist.symm_tensor((1024,), torch.float32)
    triton_dist.barrier()
    mix_kernel[(1,)](x, y, N=1024)
    triton_dist.barrier()
    return True

if __name__ == "__main__":
    sys.exit(triton_dist.main_or_launch(main, world_size=2))
"""


def test_predicted_trace_slices_nest_on_every_track(tmp_path):
    """`triton-dist predict --trace`: a core's pipes overlap in time (a local load runs while a
    peer's load streams), so one track per core holding every op had slices overlapping in
    part (the local load [1.1, 5.4] us across the remote one [0, 3.8] us here); each core gets
    a track per pipe, and every track's slices nest."""
    from triton_dist.cli import main
    script = tmp_path / "mixed_pipes.py"
    script.write_text(MIXED_PIPES)
    out = tmp_path / "pred.json"
    assert main(["predict", "-n", "2", "--device", "atlas-a2", str(script), "--trace", str(out)]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    ops = [e for e in events if e.get("cat") == "op"]
    assert len([e for e in ops if e["name"] == "load"]) == 6          # 3 loads on each of 2 ranks
    assert _nesting_faults(events) == []
    names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"core 0", "core 0 mte", "core 0 link"} <= names, names      # the program, and a track per pipe
