"""Seed exploration split across machines: shards, their result files, and the merge.

    triton-dist explore -n 4 script.py --seeds 300 --shard 0/3 [--results FILE]
    pytest tests/test_x.py --sim-schedule explore --sim-seeds 300 --sim-seed-shard 0/3 [--sim-seed-results FILE]
    triton-dist explore-merge FILES...

Seed s belongs to shard I of N when s mod N == I (the seed's own number, not its position in
the range: a shard keeps its seeds whatever --first-seed/--sim-seed the others use).  Every shard
tries only its seeds and writes what it found to a JSON file; the merge prints, per failure,
the first failing seed over all shards with its replay line.  Each shard stops (per test, or at
a race) at its own first failing seed, so the merged first seed of a failure is the one a single
run over all the seeds reports.  The machines are the CI system's (a job matrix, docs/guide.md):
nothing here schedules anything.

Standard library only: the pytest plugin imports it without the simulator.
"""
from __future__ import annotations

import json
import os

FORMAT = "triton-dist seed shard 1"
DEFAULT_DIR = os.path.join(".triton_dist", "seed-shards")


class ShardError(ValueError):
    """A malformed --shard / --sim-seed-shard value, or a result file the merge cannot use."""


def parse(text: str) -> tuple[int, int]:
    """'I/N' -> (I, N) with 0 <= I < N."""
    try:
        i, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise ShardError(f"a shard is written I/N (shard I of N, counted from 0: 0/3, 1/3, 2/3), got {text!r}") \
            from None
    if n < 1 or not 0 <= i < n:
        raise ShardError(f"shard {text!r}: N must be at least 1 and I between 0 and N-1 (0/{max(n, 1)} to "
                         f"{max(n, 1) - 1}/{max(n, 1)})")
    return i, n


def seeds(first: int, count: int, shard: tuple[int, int] | None) -> list[int]:
    """The seeds of range(first, first + count) that `shard` tries (all of them for None)."""
    if shard is None:
        return list(range(first, first + count))
    i, n = shard
    start = first + (i - first) % n         # the first seed >= first with seed mod n == i
    return list(range(start, first + count, n))


def default_path(source: str, shard: tuple[int, int], name: str = "") -> str:
    """Where a shard writes its results when no path is given."""
    stem = f"{source}-{name}-" if name else f"{source}-"
    return os.path.join(DEFAULT_DIR, f"{stem}shard-{shard[0]}-of-{shard[1]}.json")


def write(path: str, *, source: str, shard: tuple[int, int], first: int, count: int, schedule: str,
          tried: int, failures: dict) -> str:
    """Write one shard's record.  failures: key (a test id, or a script's failure kind) ->
    {"seed", "message", "replay", "count"}: the shard's first failing seed of that key."""
    doc = {"format": FORMAT, "source": source, "shard": f"{shard[0]}/{shard[1]}", "first_seed": first,
           "seeds": count, "schedule": schedule, "tried": tried, "failures": failures}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    os.replace(tmp, path)               # a reader (the merge job) never sees half a file
    return path


def _load(path: str) -> dict:
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise ShardError(f"cannot read shard results {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ShardError(f"{path} is not a shard result file (bad JSON: {e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ShardError(f"{path} is not a shard result file of this triton-dist (want format {FORMAT!r}); "
                         f"pass the files written by --shard / --sim-seed-shard")
    return doc


def merge(paths: list[str]) -> tuple[list[str], int]:
    """The union of the shards' files: (lines to print, exit status: 1 if anything failed).
    Files of different runs (another N, seed range or schedule) are refused."""
    if not paths:
        raise ShardError("give the shard result files to merge")
    docs = [(p, _load(p)) for p in paths]
    ref_path, ref = docs[0]
    runs = {}
    for p, d in docs:
        key = (d["source"], d["schedule"], d["first_seed"], d["seeds"])
        if key != (ref["source"], ref["schedule"], ref["first_seed"], ref["seeds"]) \
                or parse(d["shard"])[1] != parse(ref["shard"])[1]:
            raise ShardError(f"{p} is from another run than {ref_path} (shard {d['shard']} of seeds "
                             f"{d['first_seed']}+{d['seeds']} under {d['schedule']}, against {ref['shard']} of "
                             f"{ref['first_seed']}+{ref['seeds']} under {ref['schedule']}): merge one run's shards")
        runs.setdefault(d["shard"], p)
    n = parse(ref["shard"])[1]
    merged: dict = {}
    for _, d in docs:
        for key, f in d["failures"].items():
            best = merged.get(key)
            count = f.get("count", 1) + (best["count"] if best else 0)
            if best is None or f["seed"] < best["seed"]:
                best = dict(f, shard=d["shard"])
            best["count"] = count
            merged[key] = best
    last = ref["first_seed"] + ref["seeds"] - 1
    tried = sum(d["tried"] for _, d in docs if runs.get(d["shard"]) is not None)
    lines = [f"merged {len(runs)} of {n} shards ({ref['source']}, schedule {ref['schedule']}, seeds "
             f"{ref['first_seed']}-{last}): {tried} seed runs, {len(merged)} failing"]
    missing = [f"{i}/{n}" for i in range(n) if f"{i}/{n}" not in runs]
    if missing:
        lines.append(f"  shards missing: {', '.join(missing)} -- their seeds were not tried; a failure found only "
                     f"there is not in this list")
    for key, f in sorted(merged.items(), key=lambda kv: (kv[1]["seed"], kv[0])):
        lines.append(f"  {key}")
        lines.append(f"     first failing seed {f['seed']} (shard {f['shard']}, {f['count']} failing in all): "
                     f"{f['message']}")
        lines.append(f"     replay: {f['replay']}")
    return lines, 1 if merged else 0


def _configure(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="result files of the shards (triton-dist explore --shard, pytest --sim-seed-shard)")


def _merge(args) -> int:
    from .cli import CliError
    try:
        lines, rc = merge(args.files)
    except ShardError as e:
        raise CliError(str(e)) from None
    print("\n".join(lines))
    return rc


def _subcommand():
    from .cli import Subcommand
    return Subcommand("explore-merge", "print the union of sharded explorations (explore --shard, pytest "
                      "--sim-seed-shard): the first failing seed of each failure, with its replay line",
                      _configure, _merge, order=25)


MERGE = _subcommand()
