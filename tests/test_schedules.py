"""The Core tests' programs pass under the deterministic schedules too, for several seeds."""
import pytest

import triton_dist

import test_primitives as P

SEEDS = [0, 1, 2]


@pytest.mark.parametrize("schedule", ["random", "pct"])
@pytest.mark.parametrize("seed", SEEDS)
def test_ping_pong(schedule, seed):
    res = triton_dist.launch(P._ping_pong, world_size=2, schedule=schedule, seed=seed)
    assert res.values[0][0] == list(range(1, 31))
    assert res.values[1][0] == [10 * i for i in range(1, 31)]


@pytest.mark.parametrize("schedule", ["random", "pct"])
@pytest.mark.parametrize("seed", SEEDS)
def test_ring_put_get(schedule, seed):
    import torch
    n = 3
    res = triton_dist.launch(P._put_get, world_size=n, schedule=schedule, seed=seed)
    for r, (put, get) in enumerate(res.values):
        want = torch.randn(64, generator=torch.Generator().manual_seed((r + n - 1) % n))
        torch.testing.assert_close(put, want)
        torch.testing.assert_close(get, want)


@pytest.mark.parametrize("schedule", ["random", "pct"])
@pytest.mark.parametrize("seed", SEEDS)
def test_repeated_barriers(schedule, seed):
    n = 3
    res = triton_dist.launch(P._barriers, 2, world_size=n, schedule=schedule, seed=seed)
    for r, vals in enumerate(res.values):
        assert vals == [i * 100 + (r - 1) % n for i in range(10)]


@pytest.mark.parametrize("schedule", ["random", "pct"])
@pytest.mark.parametrize("seed", SEEDS)
def test_producer_consumer_and_notify_wait(schedule, seed):
    import torch
    res = triton_dist.launch(P._prod_cons, world_size=2, schedule=schedule, seed=seed)
    for v in res.values:
        torch.testing.assert_close(v, torch.arange(16, dtype=torch.float32) * 2)
    n = 3
    res = triton_dist.launch(P._notify_wait, world_size=n, schedule=schedule, seed=seed)
    want = torch.arange(1, n + 1, dtype=torch.float32).repeat_interleave(8)
    for out, _ in res.values:
        torch.testing.assert_close(out, want)


def _wait_forever():
    import torch
    from test_errors import wait_forever_kernel
    sig = triton_dist.symm_tensor((16,), torch.int32)
    wait_forever_kernel[(1,)](sig)


def test_deadlock_is_found_at_once_under_a_schedule():
    import time
    t = time.monotonic()
    with pytest.raises(triton_dist.DeadlockError) as ei:
        triton_dist.launch(_wait_forever, world_size=2, schedule="random", seed=1, timeout=300)
    assert time.monotonic() - t < 150          # found by the schedule, long before the timeout (any load)
    assert "awaits 1, sees 0" in str(ei.value) and "seed=1" in str(ei.value)
