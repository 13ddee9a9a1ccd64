"""A failure says how to reproduce and check it (issue 24 item 4).

The free schedule does not replay, so a failure under it must print the commands that
reproduce it under a deterministic schedule and run the race check, each in the caller's
own terms (launch(), `triton-dist`, pytest), and carry every option that changes the run
(the memory model among them).  Before issue 24 a free-schedule failure printed only the
user's assertion, and pytest's replay line dropped the memory model.
"""
import textwrap

import pytest

import triton_dist
from triton_dist.cli import main

FAILING = textwrap.dedent('''
    import triton_dist
    triton_dist.init()
    assert triton_dist.rank() != 1, "rank 1 fails on purpose"
''')


def _fails():
    assert triton_dist.rank() != 1, "rank 1 fails on purpose"


def test_a_free_schedule_failure_of_launch_names_a_deterministic_schedule_and_the_race_check(monkeypatch):
    from triton_dist import launcher
    monkeypatch.setitem(launcher.FAILURE_HINT, "free", None)    # launch() outside pytest: in its own terms
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_fails, world_size=2, memory_model="coherent", timeout=60)
    text = str(ei.value)
    assert "rank 1 fails on purpose" in text
    assert "free schedule, which does not replay" in text
    assert "schedule='explore', seed=S" in text and "race_check=True" in text, text


def test_under_pytest_the_hint_is_in_pytests_terms(request):
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_fails, world_size=2, timeout=60)
    node = request.node.nodeid
    assert f"`pytest {node} --sim-schedule explore --sim-seeds 50`" in str(ei.value), str(ei.value)
    assert f"`pytest {node} --sim-race-check`" in str(ei.value)


def test_a_deterministic_failure_of_launch_gives_its_replay_line_with_the_memory_model():
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_fails, world_size=2, schedule="pct", seed=3, memory_model="coherent", timeout=60)
    assert ei.value.replay == ("triton_dist.launch(_fails, ..., world_size=2, schedule='pct', seed=3, "
                               "memory_model='coherent')")


def test_a_free_schedule_failure_of_run_prints_the_explore_and_race_check_commands(tmp_path, capfd):
    script = tmp_path / "fails.py"
    script.write_text(FAILING)
    rc = main(["run", "-n", "2", str(script), "--memory-model", "coherent"])
    err = capfd.readouterr().err
    assert rc == 1 and "rank 1 fails on purpose" in err, err
    assert f"triton-dist explore -n 2 {script} --seeds 50 --memory-model coherent" in err, err
    assert f"triton-dist run -n 2 {script} --memory-model coherent --race-check" in err, err


def test_the_commands_carry_the_environment_that_changes_the_run(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("TRITON_DIST_SIM_CORES", "2")
    script = tmp_path / "fails.py"
    script.write_text(FAILING)
    assert main(["run", "-n", "2", str(script)]) == 1
    err = capfd.readouterr().err
    assert f"TRITON_DIST_SIM_CORES=2 triton-dist explore -n 2 {script} --seeds 50" in err, err


PYTEST_FILE = '''
import triton_dist
from triton_dist.sim import context

def _model():
    return context.runtime().memory.name

def test_model():
    assert triton_dist.launch(_model, world_size=1).values == ["coherent"]

def _fails():
    assert triton_dist.rank() != 1, "rank 1 fails on purpose"

def test_fails():
    triton_dist.launch(_fails, world_size=2)
'''


def test_pytest_memory_model_option_reaches_launch_and_every_command_it_prints(pytester, monkeypatch):
    import os
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(test_m=PYTEST_FILE)
    r = pytester.runpytest_subprocess("--sim-memory-model", "coherent")
    r.assert_outcomes(passed=1, failed=1)        # test_model saw the option's model in the rank
    out = r.stdout.str()
    assert "pytest test_m.py::test_fails --sim-schedule explore --sim-seeds 50 --sim-memory-model coherent" in out, out
    assert "pytest test_m.py::test_fails --sim-race-check --sim-memory-model coherent" in out, out
    replay = next(ln for ln in out.splitlines() if ln.startswith("pytest ") and "--sim-schedule free" in ln)
    assert replay.split("  (")[0].endswith("--sim-memory-model coherent"), replay


def test_a_deterministic_replay_line_carries_the_environment_that_changes_the_run(monkeypatch):
    monkeypatch.setenv("TRITON_DIST_SIM_INIT_CHECK", "1")
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(_fails, world_size=2, schedule="random", seed=1, timeout=60)
    assert ei.value.replay.endswith("with TRITON_DIST_SIM_INIT_CHECK=1 in the environment"), ei.value.replay
