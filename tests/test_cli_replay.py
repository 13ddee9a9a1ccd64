"""The replay line `triton-dist explore` prints replays exactly when pasted, the script's own
arguments included (issue 14 item 15)."""
import re
import shlex
import textwrap

from triton_dist.cli import main

# Racy only when asked: with `--check "lost update"` it asserts on the outcome of an
# unsynchronised read-modify-write; without arguments it only prints it, so it passes.
SCRIPT = textwrap.dedent('''
    import sys, torch, triton, triton.language as tl
    import triton_dist, triton_dist.language as dl
    from triton_dist.language.extra import libshmem_device as shm

    @triton.jit
    def bump(buf, out):
        p = dl.symm_at(buf, 0)
        v = tl.load(p + tl.arange(0, 1))
        tl.store(p + tl.arange(0, 1), v + 1)
        shm.barrier_all()
        tl.store(out + tl.arange(0, 1), tl.load(p + tl.arange(0, 1)))

    triton_dist.init()
    buf = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    bump[(1,)](buf, out)
    if sys.argv[1:3] == ["--check", "lost update"]:
        assert out.item() == triton_dist.world_size(), f"lost update: {out.item()}"
''')


def test_the_printed_replay_line_replays_with_the_script_arguments(tmp_path, capsys):
    script = tmp_path / "racy args.py"          # a space in the path: the line must quote it
    script.write_text(SCRIPT)
    # seed 0 of the random schedule loses the update (a schedule is the same on every machine)
    base = ["-n", "2", str(script), "--seeds", "2", "--schedule", "random", "--timeout", "30"]
    assert main(["explore", *base]) == 0                 # without its arguments the script passes
    capsys.readouterr()
    assert main(["explore", *base, "--", "--check", "lost update"]) == 1
    out = capsys.readouterr().out
    assert "AssertionError: lost update" in out, out
    m = re.search(r"first seed (\d+) \(digest (\w+)\); replay: (.*)$", out, re.M)
    assert m, out
    seed, digest, line = m.groups()
    argv = shlex.split(line)
    assert argv[:2] == ["triton-dist", "replay"] and argv[-3:] == ["--", "--check", "lost update"], argv
    assert main(argv[1:]) == 1
    replayed = capsys.readouterr().out
    assert "AssertionError: lost update" in replayed
    assert f"schedule digest {digest}" in replayed.splitlines()
    assert f"seed {seed} under schedule='random'" in replayed


def test_replay_takes_the_script_arguments_after_dashdash(tmp_path, capsys):
    script = tmp_path / "argv.py"
    script.write_text("import sys, triton_dist\ntriton_dist.init()\n"
                      "assert sys.argv[1:] == ['a b', '--x', '-n'], sys.argv\n")
    assert main(["replay", "-n", "2", str(script), "--schedule", "pct", "--seed", "3",
                 "--", "a b", "--x", "-n"]) == 0
    assert "seed 3 of schedule pct passed on 2 ranks" in capsys.readouterr().out
