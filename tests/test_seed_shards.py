"""Seed exploration split over machines (issue 35 item 4): `triton-dist explore --shard I/N`,
`pytest --sim-seed-shard I/N`, `triton-dist explore-merge`.  The oracle is one unsharded run
over the same seeds: the shards together must find the same first failing seed, and the
merged replay line must reproduce the failure."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from triton_dist import seed_shards
from triton_dist.cli import main

from test_cli import RACY


def _first_seed(out: str) -> int:
    line = [ln for ln in out.splitlines() if "replay: triton-dist replay" in ln][0]
    return int(line.split("--seed ")[1].split()[0])


def test_seed_split_covers_each_seed_once():
    for first, count, n in ((0, 10, 3), (7, 5, 4), (3, 2, 5)):
        parts = [seed_shards.seeds(first, count, (i, n)) for i in range(n)]
        assert sorted(s for p in parts for s in p) == list(range(first, first + count))
        assert all(s % n == i for i, p in enumerate(parts) for s in p)


@pytest.mark.parametrize("text", ["3/3", "1", "a/b", "0/0", "-1/2"])
def test_a_bad_shard_is_refused_saying_how_to_write_one(text, capsys):
    with pytest.raises(seed_shards.ShardError, match="I/N|N must be"):
        seed_shards.parse(text)


def test_explore_shards_find_the_seed_one_run_finds_and_the_merge_replays_it(tmp_path, capsys):
    racy = tmp_path / "racy.py"
    racy.write_text(RACY)
    args = ["explore", "-n", "3", str(racy), "--seeds", "6", "--schedule", "random"]
    assert main(args) == 1
    whole = _first_seed(capsys.readouterr().out)
    files = []
    for i in range(3):
        files.append(str(tmp_path / f"s{i}.json"))
        main(args + ["--shard", f"{i}/3", "--results", files[-1]])
        out = capsys.readouterr().out
        assert f"shard {i}/3" in out and files[-1] in out
        doc = json.loads(open(files[-1]).read())
        assert doc["tried"] == 2                      # seeds i and i + 3 only
    assert main(["explore-merge"] + files) == 1
    out = capsys.readouterr().out
    assert "merged 3 of 3 shards" in out and "missing" not in out
    assert "lost an increment" in out
    assert _first_seed(out) == whole
    line = [ln for ln in out.splitlines() if "replay: triton-dist replay" in ln][0]
    argv = line.split("replay: triton-dist ")[1].split()
    assert main(argv) == 1
    assert "lost an increment" in capsys.readouterr().out
    # a shard left out is named; the merge does not pretend to cover its seeds
    assert main(["explore-merge"] + files[:1] + files[2:]) in (0, 1)
    assert f"shards missing: {1}/3" in capsys.readouterr().out


def test_merge_refuses_shards_of_different_runs(tmp_path, capsys):
    a = seed_shards.write(str(tmp_path / "a.json"), source="explore", shard=(0, 2), first=0, count=10,
                          schedule="pct", tried=5, failures={})
    b = seed_shards.write(str(tmp_path / "b.json"), source="explore", shard=(1, 2), first=0, count=20,
                          schedule="pct", tried=10, failures={})
    assert main(["explore-merge", a, a]) == 0               # nothing failed: exit 0
    assert "0 failing" in capsys.readouterr().out
    for files, words in (([a, b], "from another run"), ([str(tmp_path / "c.json")], "not a shard result file")):
        (tmp_path / "c.json").write_text("{}")
        with pytest.raises(SystemExit) as ei:
            main(["explore-merge", *files])
        assert ei.value.code == 2 and words in capsys.readouterr().err


PYTEST_RACY = textwrap.dedent('''
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

    def body():
        buf = triton_dist.symm_tensor((16,), torch.int32)
        out = torch.zeros(1, dtype=torch.int32)
        bump[(1,)](buf, out)
        return out.item()

    def test_bump():
        got = triton_dist.launch(body, world_size=3)
        assert got == [3, 3, 3], f"lost an increment: {got}"
''')


def _pytest(tmp_path, *extra):
    env = dict(os.environ, PYTHONPATH="")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_racy.py",
                        "--sim-schedule", "random", "--sim-seeds", "6", *extra],
                       cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    return r.returncode, r.stdout + r.stderr


def test_pytest_shards_find_the_seed_one_session_finds(tmp_path):
    (tmp_path / "test_racy.py").write_text(PYTEST_RACY)
    rc, out = _pytest(tmp_path)
    assert rc == 1, out
    whole = int(out.split("--sim-seed ")[1].split()[0])        # the session's replay line
    # two shards here (each session pays torch's import); the CLI test above splits in three
    files = [str(tmp_path / f"p{i}.json") for i in range(2)]
    for i in range(2):
        _, out = _pytest(tmp_path, "--sim-seed-shard", f"{i}/2", "--sim-seed-results", files[i])
        assert f"seed shard {i}/2" in out, out
    merged = subprocess.run([sys.executable, "-m", "triton_dist.cli", "explore-merge", *files],
                            capture_output=True, text=True)
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert "test_racy.py::test_bump" in merged.stdout
    assert f"first failing seed {whole} " in merged.stdout
    assert f"--sim-seed {whole}" in merged.stdout
