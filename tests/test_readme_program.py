"""The README's "A kernel" program runs as users run it: `python`, `triton-dist run -n 4` and
`torchrun --nproc-per-node=4`; and launch() inside a rank is refused saying what to do.

Oracle: the all-gather's result is known by arithmetic (rank r's block holds r), and the
README says how each runner is used.  Before the fix the README program, which called
launch() at the top level, failed under `triton-dist run` with multiprocess's "daemonic
processes are not allowed to have children" and ran 4 whole simulations under torchrun.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import triton_dist

ROOT = Path(__file__).resolve().parent.parent
WANT = str([float(r) for r in range(4) for _ in range(8)])


def _readme_program() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## A kernel"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _env():
    env = dict(os.environ, TRITON_DIST_BACKEND="sim", OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


RUNNERS = {
    "python": [],
    "triton-dist run": ["-m", "triton_dist.cli", "run", "-n", "4"],
    "torchrun": ["-m", "torch.distributed.run", "--nproc-per-node=4"],
}


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_readme_program_runs_under(runner, tmp_path):
    script = tmp_path / "allgather.py"
    script.write_text(_readme_program())
    p = subprocess.run([sys.executable, *RUNNERS[runner], str(script)], capture_output=True, text=True,
                       timeout=300, env=_env(), cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert p.stdout.count(WANT) == 1, out          # rank 0 printed the gathered blocks, once: one simulation
    assert "daemonic" not in out


NESTED = """
import sys
import triton_dist

def main():
    return 1

print(triton_dist.launch(main, world_size=2).values)
"""


@pytest.mark.parametrize("runner", ["triton-dist run", "torchrun"])
def test_launch_inside_a_rank_says_to_use_main_or_launch(runner, tmp_path):
    script = tmp_path / "nested.py"
    script.write_text(NESTED)
    # one torchrun process is enough to show it (and costs a third of four)
    args = [a.replace("4", "1" if runner == "torchrun" else "2") for a in RUNNERS[runner]]
    p = subprocess.run([sys.executable, *args, str(script)], capture_output=True, text=True,
                       timeout=300, env=_env(), cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "main_or_launch(main, world_size=2)" in out and "triton_dist.init()" in out, out
    assert "already rank" in out and "daemonic" not in out, out
    assert "[1, 1]" not in p.stdout, out            # no nested simulation ran


def _nested_launch():
    try:
        triton_dist.launch(lambda: 1, world_size=2)
    except triton_dist.TritonDistError as e:
        return str(e)
    return "no error"


def test_launch_inside_a_launched_rank_is_refused():
    msgs = triton_dist.launch(_nested_launch, world_size=2).values
    for r, msg in enumerate(msgs):
        assert f"already rank {r} of 2" in msg and "main_or_launch" in msg and "init()" in msg, msg
