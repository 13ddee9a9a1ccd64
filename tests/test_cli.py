"""`triton-dist run / explore / replay`, end to end on small scripts."""
import json
import subprocess
import sys
import textwrap

import pytest

from triton_dist.cli import main

RACY = textwrap.dedent('''
    import torch, triton, triton.language as tl
    import triton_dist, triton_dist.language as dl
    from triton_dist.language.extra import libshmem_device as shm

    @triton.jit
    def bump(buf, out):
        p = dl.symm_at(buf, 0)
        v = tl.load(p + tl.arange(0, 1))
        tl.store(p + tl.arange(0, 1), v + 1)       # planted race: unsynchronised read-modify-write
        shm.barrier_all()
        tl.store(out + tl.arange(0, 1), tl.load(p + tl.arange(0, 1)))

    triton_dist.init()
    buf = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    bump[(1,)](buf, out)
    assert out.item() == triton_dist.world_size(), f"lost an increment: {out.item()}"
''')

# The same race without the check of its outcome: under the free schedule the lost update
# happens only sometimes, and a rank that fails ends the launch before the race analysis.
RACY_UNCHECKED = RACY.replace('assert out.item() == triton_dist.world_size(), f"lost an increment: {out.item()}"',
                              "print(out.item())")

HELLO = textwrap.dedent('''
    import sys, triton_dist
    triton_dist.init()
    # one write per line: print() writes the text and the newline apart, and under load the
    # ranks' lines interleave between the two ("rank 1 of 3 ...rank 2 of 3 ...")
    sys.stdout.write(f"rank {triton_dist.rank()} of {triton_dist.world_size()} args {sys.argv[1:]}\\n")
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and triton_dist.rank() == 1 else 0)
''')


@pytest.fixture
def racy(tmp_path):
    p = tmp_path / "racy.py"
    p.write_text(RACY)
    return str(p)


def test_run_passes_args_and_exit_status(tmp_path, capfd):
    p = tmp_path / "hello.py"
    p.write_text(HELLO)
    assert main(["run", "-n", "2", str(p), "0"]) == 0
    assert main(["run", "-n", "2", str(p), "3"]) == 1
    err = capfd.readouterr().err
    assert "rank 1 raised ScriptFailed: hello.py exited with status 3" in err


def test_explore_finds_the_planted_race_and_replay_reproduces_it(racy, tmp_path, capsys):
    rc = main(["explore", "-n", "3", racy, "--seeds", "12", "--schedule", "random"])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "explored 12 seeds of schedule random on 3 ranks" in out
    assert "AssertionError: lost an increment" in out
    line = [ln for ln in out.splitlines() if "replay: triton-dist replay" in ln][0]
    seed = int(line.split("--seed ")[1].split()[0])
    trace = tmp_path / "t.json"
    rc = main(["replay", "-n", "3", racy, "--schedule", "random", "--seed", str(seed),
               "--events", "15", "--trace", str(trace)])
    out1 = capsys.readouterr().out
    assert rc == 1 and "lost an increment" in out1
    assert "last 15 of" in out1 and "racy.py:11 (bump)" in out1   # the barrier_all line
    # a replay is exact: the same digest and the same events every time
    assert main(["replay", "-n", "3", racy, "--schedule", "random", "--seed", str(seed), "--events", "15"]) == 1
    out2 = capsys.readouterr().out
    digest = [ln for ln in out1.splitlines() if ln.startswith("schedule digest")]
    assert digest and digest[0] in out2.splitlines()
    ev = lambda o: [ln for ln in o.splitlines() if ln.lstrip().startswith("step ")]  # noqa: E731
    assert ev(out1) == ev(out2) and len(ev(out1)) == 15
    # the trace loads as Chrome trace JSON, with one track per rank and core
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    assert all({"ph", "pid", "tid"} <= set(e) for e in events)
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"rank 0", "rank 1", "rank 2", "host", "core 0"} <= names
    spans = [e for e in events if e["ph"] in "BE"]
    assert any(e["name"] == "kernel bump" for e in spans) and any(e["name"] == "barrier_all" for e in spans)
    begins = sum(e["ph"] == "B" for e in spans)
    assert begins == sum(e["ph"] == "E" for e in spans)


def test_run_writes_a_trace_in_the_free_schedule(racy, tmp_path):
    trace = tmp_path / "free.json"
    main(["run", "-n", "2", "--trace", str(trace), racy])
    doc = json.loads(trace.read_text())
    assert any(e.get("name") == "cache flush at kernel end" for e in doc["traceEvents"])


@pytest.mark.parametrize("argv,words", [
    (["run", "-n", "2", "nope.py"], "no such file"),
    (["run", "-n", "0", __file__], "-n must be between 1 and 64"),
    (["explore", "-n", "2", __file__, "--schedule", "free"], "needs a deterministic schedule"),
    (["replay", "-n", "2", __file__], "--seed"),
    (["run", "-n", "2", "--schedule", "sometimes", __file__], "invalid choice"),
])
def test_bad_arguments_give_a_short_error(argv, words, capsys):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_every_subcommand_has_help():
    for cmd in ("run", "explore", "replay", "lower"):
        p = subprocess.run([sys.executable, "-m", "triton_dist.cli", cmd, "--help"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and "usage: triton-dist " + cmd in p.stdout


def test_run_with_race_check_reports_the_planted_race(tmp_path, capfd):
    racy = tmp_path / "racy.py"
    racy.write_text(RACY_UNCHECKED)
    assert main(["run", "-n", "2", "--race-check", str(racy)]) == 1
    err = capfd.readouterr().err
    assert "racy.py:" in err and "rank" in err


def test_run_an_example_written_for_torchrun(capfd):
    import os
    example = os.path.join(os.path.dirname(__file__), "..", "examples", "hello_allgather.py")
    assert main(["run", "-n", "2", example]) == 0
    assert "allgather on 2 ranks: OK" in capfd.readouterr().out


# ---- issue 26 item 7: options after the script; explore --race-check stops at the first race ----

def test_run_honours_its_own_options_after_the_script(tmp_path, capfd):
    """docs/races.md writes `triton-dist run -n N script.py --race-check`: the check runs (exit 1
    on the planted race, with its report), it is not handed to the script."""
    racy = tmp_path / "racy.py"
    racy.write_text(RACY_UNCHECKED.replace("print(out.item())", "import sys; print('argv', sys.argv[1:])"))
    assert main(["run", "-n", "2", str(racy), "--race-check"]) == 1
    cap = capfd.readouterr()
    assert "on symmetric memory" in cap.err and "racy.py:" in cap.err, cap.err
    assert "argv []" in cap.out, cap.out                      # the script got nothing


def test_run_passes_the_scripts_own_arguments_and_everything_after_dashdash(tmp_path, capfd):
    p = tmp_path / "hello.py"
    p.write_text(HELLO)
    assert main(["run", "-n", "2", str(p), "0", "--size", "3", "--schedule", "pct", "--seed", "4",
                 "--", "--race-check"]) == 0
    cap = capfd.readouterr()
    assert "args ['0', '--size', '3', '--race-check']" in cap.out, cap.out
    assert "(schedule pct, seed 4," in cap.err, cap.err          # --schedule/--seed were honoured


def test_explore_with_race_check_stops_at_the_first_race(tmp_path, capsys):
    racy = tmp_path / "racy.py"
    racy.write_text(RACY_UNCHECKED)
    rc = main(["explore", "-n", "2", str(racy), "--seeds", "6", "--schedule", "pct", "--race-check"])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "explored 1 seeds of schedule pct on 2 ranks" in out, out
    assert "stopped at seed 0, the first with a race" in out and "racy.py:" in out, out


@pytest.mark.parametrize("after,words", [
    (["--time", "5"], "--time after the script is an abbreviation of triton-dist's --timeout"),
    (["--race"], "abbreviation of triton-dist's --race-check"),
    (["--seed", "2"], "--seed is given both before and after the script"),
    (["-n", "3"], "-n/--nproc is given both before and after the script"),
])
def test_run_refuses_options_after_the_script_it_cannot_tell_apart(after, words, tmp_path, capsys):
    """What looks like one of triton-dist's options after the script is never handed to the
    script unseen: an abbreviation (argparse takes `--time` for --timeout before the script)
    or an option given twice is refused, saying where the script's own options go."""
    p = tmp_path / "hello.py"
    p.write_text(HELLO)
    with pytest.raises(SystemExit) as ei:
        main(["run", "-n", "2", "--seed", "1", str(p)] + after)
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "after --" in err and "Traceback" not in err, err


def test_run_takes_nproc_after_the_script(tmp_path, capfd):
    p = tmp_path / "hello.py"
    p.write_text(HELLO)
    assert main(["run", str(p), "-n", "3", "0"]) == 0
    out = capfd.readouterr().out
    assert sorted(ln for ln in out.splitlines() if ln.startswith("rank ")) == \
        [f"rank {r} of 3 args ['0']" for r in range(3)], out
