"""Issue 32, "Silent or crashing": no silent slice, comparisons that cannot crash, seeds
normalised once.  Each case is checked on both sides (refused / accepted) against an outside
oracle: numpy or torch for values, the range a schedule's seed has (an unsigned 64-bit word of
the shared schedule state) for seeds."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import triton_dist
from triton_dist.errors import TritonDistError
from triton_dist.sim.schedulers import explore


# --- seeds: one range, checked once, the member named is the member that ran ---------------------

def _member_that_ran():
    from triton_dist.sim import context
    return context.runtime().sched.member


@pytest.mark.parametrize("seed", [-1, -5, 1 << 64])
def test_a_seed_outside_64_bits_is_refused_by_launch(seed):
    with pytest.raises(TritonDistError, match=r"seed must be in 0\.\.2\*\*64-1"):
        triton_dist.launch(_member_that_ran, world_size=1, schedule="explore", seed=seed)


@pytest.mark.parametrize("seed", [0, 4, (1 << 64) - 1])
def test_a_seed_in_range_runs_the_member_it_names(seed):
    res = triton_dist.launch(_member_that_ran, world_size=1, schedule="explore", seed=seed)
    # the member explore names for the seed, by its rule: MEMBERS[seed % len(MEMBERS)]
    cls, _ = explore.MEMBERS[seed % len(explore.MEMBERS)]
    assert res.values[0].split("(")[0] == cls.name == explore.describe(seed).split("(")[0]


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "triton_dist.cli", *argv], capture_output=True, text=True,
                          timeout=300)


def test_cli_refuses_out_of_range_seeds_before_running(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    for argv, option in ((["explore", "-n", "1", str(script), "--first-seed", "-5", "--seeds", "3"], "--first-seed"),
                         (["replay", "-n", "1", str(script), "--seed", "-1"], "--seed"),
                         (["run", "-n", "1", "--schedule", "pct", "--seed", str(1 << 64), str(script)], "--seed"),
                         (["explore", "-n", "1", str(script), "--first-seed", str((1 << 64) - 2), "--seeds", "5"],
                          "--first-seed")):
        p = _cli(*argv)
        assert p.returncode == 2, (argv, p.stdout, p.stderr)
        assert option in p.stderr and "2**64-1" in p.stderr and "must not run" not in p.stderr, p.stderr
