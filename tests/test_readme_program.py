"""README.md's code blocks run as the README says: the first kernel (send_tile.py) under
`python`, `triton-dist run -n 2` and `torchrun --nproc-per-node=2`; the pytest file with the
`backend` fixture; and the buggy twin (the fence line deleted) is caught with the diagnosis the
README shows.  launch() inside a rank is refused saying what to do.

Oracle: the kernel's consumer compares what it read with torch's `arange(N) + 1` (the tile the
producer sent); the twin's verdict is the device model's `[fence]` finding, which the README
pastes.  Before the README was rewritten it had no producer/consumer block, no pytest block and
no twin, so these tests could not find them.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import triton_dist

ROOT = Path(__file__).resolve().parent.parent


def _block(first_line: str) -> str:
    """The README's ```python block that begins with the comment `first_line`."""
    text = (ROOT / "README.md").read_text()
    for body in re.findall(r"```python\n(.*?)```", text, re.S):
        if body.startswith(first_line + "\n"):
            return body
    raise AssertionError(f"README.md has no python block beginning {first_line!r}")


def _twin(program: str) -> str:
    lines = program.split("\n")
    fence = [ln for ln in lines if ln.strip().startswith("shm.fence()")]
    assert len(fence) == 1, "the README's kernel should have exactly one shm.fence() line"
    return "\n".join(ln for ln in lines if ln not in fence)


def _env():
    env = dict(os.environ, TRITON_DIST_BACKEND="sim", OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def _run(args, cwd):
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, env=_env(), cwd=cwd)
    return p.returncode, p.stdout + p.stderr


RUNNERS = {
    "python": [],
    "triton-dist run": ["-m", "triton_dist.cli", "run", "-n", "2"],
    "torchrun": ["-m", "torch.distributed.run", "--nproc-per-node=2"],
}


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_readme_program_runs_under(runner, tmp_path):
    (tmp_path / "send_tile.py").write_text(_block("# send_tile.py"))
    rc, out = _run([*RUNNERS[runner], "send_tile.py"], tmp_path)
    assert rc == 0, out
    assert "daemonic" not in out and "rank 1 read" not in out, out


def test_readme_pytest_file_passes_with_the_backend_fixture(tmp_path):
    (tmp_path / "send_tile.py").write_text(_block("# send_tile.py"))
    (tmp_path / "test_send_tile.py").write_text(_block("# test_send_tile.py"))
    rc, out = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_send_tile.py"], tmp_path)
    assert rc == 0 and "1 passed" in out, out


def test_readme_buggy_twin_is_caught_with_the_shown_diagnosis(tmp_path):
    """The replay command the README shows prints the `[fence]` finding the README pastes."""
    (tmp_path / "send_tile_nofence.py").write_text(_twin(_block("# send_tile.py")))
    readme = (ROOT / "README.md").read_text()
    cmd = "triton-dist replay -n 2 send_tile_nofence.py --schedule explore --seed 0"
    assert f"$ .venv/bin/{cmd}" in readme
    rc, out = _run(["-m", "triton_dist.cli", *cmd.split()[1:]], tmp_path)
    assert rc != 0, out
    shown = readme.split(f"$ .venv/bin/{cmd}\n", 1)[1].split("\n\n", 1)[0]
    for line in shown.split("\n")[:3]:     # the error, the header, the [fence] finding: word for word
        assert line.strip() in out, f"README shows {line.strip()!r}; the replay printed:\n{out}"
    assert "[fence]" in shown and "Fix: call libshmem_device.fence()" in out, out


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
    args = [a.replace("=2", "=1") for a in RUNNERS[runner]]   # one torchrun process shows it
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


def _readme_tables() -> str:
    return "\n".join(ln for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("|"))


def test_readme_command_table_names_every_cli_command():
    """Oracle: the CLI's own argparse parser.  A command added to the CLI but missing from the
    README's table (explore-merge and predict were) fails here."""
    import argparse
    from triton_dist.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    tables = _readme_tables()
    missing = [name for name in sub.choices if f"`triton-dist {name}" not in tables]
    assert not missing, f"README.md's command table lacks: {missing}"


def test_readme_pytest_options_exist(pytestconfig):
    """Oracle: the options pytest registered from the plugin.  An option the README names that
    the plugin does not register would be an error for the reader who copies it."""
    named = set(re.findall(r"`(--[a-z][a-z0-9-]*)", _readme_tables()))
    assert named, "README.md's tables name no pytest options"
    unknown = [opt for opt in sorted(named) if pytestconfig.getoption(opt.lstrip("-").replace("-", "_"),
                                                                       default="<unset>") == "<unset>"
               and not _is_cli_flag(opt)]
    assert not unknown, f"README.md names options pytest does not have: {unknown}"


def _is_cli_flag(opt: str) -> bool:
    """A flag of a triton-dist command (the command table mixes them in: --shard, --seeds)."""
    import argparse
    from triton_dist.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return any(opt in p._option_string_actions for p in sub.choices.values())
