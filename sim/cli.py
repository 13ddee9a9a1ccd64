"""`triton-dist run / explore / replay`: a script as N simulated ranks, like torchrun.

    triton-dist run -n 4 script.py [args]              run once (any schedule); triton-dist's
                                                       options may follow the script, the script's
                                                       own that share their names go after --
    triton-dist explore -n 4 script.py --seeds 200 [-- args]   many seeds; summary of outcomes
    triton-dist replay -n 4 script.py --schedule pct --seed 17 [--events 60] [--trace t.json] [-- args]

explore prints, for each kind of failure, the replay line that reruns its first seed exactly
(every option that changes the run, the script's own arguments after `--`, shell-quoted).

Each rank runs the script as __main__ with RANK/WORLD_SIZE set (so a script written for
torchrun works unchanged); a script that exits with a non-zero status fails its rank.
The simulator registers these subcommands into `triton-dist` (pyproject.toml, entry-point
group triton_dist.subcommands); triton_dist/cli.py is the front.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import time

from triton_dist.errors import LAUNCH_FAILURES

# the script as every rank's body, and the argument handling predict shares (sim/rank_script.py)
from .rank_script import check as _check, run_script, split_at_dashdash as _split_at_dashdash, warm


def _common(p: argparse.ArgumentParser, schedule_default="free", remainder=True):
    p.add_argument("-n", "--nproc", type=int, required=True, metavar="N", help="number of ranks")
    from . import schedulers
    from .cache import MODELS
    p.add_argument("--schedule", choices=list(schedulers.NAMES), default=schedule_default)
    p.add_argument("--memory-model", choices=list(MODELS), default="ascend")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before a run is declared stuck")
    p.add_argument("--race-check", action="store_true", help="report unordered conflicting accesses")
    p.add_argument("--shmem-compat", action="store_true",
                   help="run upstream Ascend host code as written: `import shmem` is the simulator's heap, "
                        "hccl is gloo, npu is the CPU (sim/compat/npu.py)")
    p.add_argument("script", help="the Python script every rank runs")
    if remainder:      # run: what follows the script is the script's, as with torchrun, except
        # triton-dist's own options, which are honoured there too (docs/races.md writes
        # `run -n N script.py --race-check`); after `--` everything is the script's
        p.add_argument("args", nargs=argparse.REMAINDER,
                       help="arguments of the script (triton-dist's own options here are honoured; "
                            "put the script's own after --)")
        _honour_options_after_script(p)
    else:              # explore/replay: options may follow the script; its own arguments go after --
        p.add_argument("args", nargs="*", help="arguments of the script (after --)")
        _split_at_dashdash(p)


def _honour_options_after_script(p: argparse.ArgumentParser) -> None:
    """`run -n 2 script.py --race-check a --b`: --race-check is triton-dist's (it used to reach
    the script, which ignored it: exit 0 on a racy program), `a --b` the script's.  The
    options of triton-dist found after the script, before any `--`, are moved in front of
    it and the command line parsed again; everything after `--` is the script's verbatim.
    Never silently the script's: an abbreviation of one of ours (`--time` for --timeout,
    which argparse takes before the script) and an option given both before and after the
    script are refused; -h/--help after the script is the script's own."""
    parse = p.parse_known_args
    nproc = next(a for a in p._actions if a.dest == "nproc")
    longs = sorted(o for o in p._option_string_actions if o.startswith("--"))

    def ours_at(tok):
        """(action, takes a separate value) if `tok` is one of triton-dist's options, else None."""
        if tok.startswith("--"):
            name = tok.split("=", 1)[0]
            action = p._option_string_actions.get(name)
            if action is None:
                full = [o for o in longs if o.startswith(name) and p._option_string_actions[o].dest != "help"]
                if full:
                    p.error(f"{tok} after the script is an abbreviation of triton-dist's {' or '.join(full)}: "
                            f"write it in full to mean triton-dist's, or put the script's own options "
                            f"after -- (run -n N script.py -- {tok} ...)")
                return None
            return action, not (action.nargs == 0 or "=" in tok)
        if len(tok) >= 2 and tok[0] == "-" and tok[1] != "-":
            action = p._option_string_actions.get(tok[:2])
            if action is not None:
                return action, action.nargs != 0 and len(tok) == 2
        return None

    def parse_known_args(args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        nproc.required = False         # -n may come after the script: required is checked below
        try:
            ns, extra = parse(args, namespace)
        finally:
            nproc.required = True
        rest = list(getattr(ns, "args", None) or [])
        head = args[:len(args) - len(rest)]          # ends with the script
        ours, theirs, i = [], [], 0
        while i < len(rest):
            tok = rest[i]
            if tok == "--":
                theirs += rest[i + 1:]
                break
            found = ours_at(tok)
            if found is None or found[0].dest == "help":
                theirs.append(tok)
                i += 1
                continue
            action, takes = found
            given = [t for t in head[:-1] for o in action.option_strings
                     if t == o or t.startswith(o + "=") or (len(o) == 2 and t.startswith(o) and t != o)]
            if given:
                p.error(f"{'/'.join(action.option_strings)} is given both before and after the script "
                        f"({given[0]} and {tok}): give it once (the script's own {tok} goes after --)")
            ours += rest[i:i + 1 + takes]
            i += 1 + takes
        if ours:
            ns, extra = parse(head[:-1] + ours + head[-1:], namespace)
        if ns.nproc is None:
            p.error("the following arguments are required: -n/--nproc")
        ns.args = theirs
        return ns, extra
    p.parse_known_args = parse_known_args


def replay_line(args, schedule, seed) -> str:
    """The command that reruns exactly this launch: every option that changes the run, and
    the script's own arguments after `--`, each quoted for a POSIX shell."""
    return command(args, "replay", ["--schedule", str(schedule), "--seed", str(seed)])


def command(args, sub: str, extra: list, race_check: bool | None = None) -> str:
    """`triton-dist SUB -n N script EXTRA` with every option of args that changes the run (and the
    environment variables that do: sim/launch.py EXECUTION_ENV), the script's arguments after --."""
    from .launch import execution_env
    q = shlex.quote
    parts = [execution_env() + "triton-dist", sub, "-n", str(args.nproc), q(args.script)] + extra
    if race_check is None:
        race_check = getattr(args, "race_check", False)
    if args.memory_model != "ascend":
        parts += ["--memory-model", args.memory_model]
    if args.timeout != 60.0:
        parts += ["--timeout", repr(args.timeout)]
    if race_check:
        parts.append("--race-check")
    if getattr(args, "shmem_compat", False):
        parts.append("--shmem-compat")
    if args.args:
        parts += ["--"] + [q(a) for a in args.args]
    return " ".join(parts)


def _check_seed(option: str, seed) -> None:
    """A seed given on the command line, refused before anything runs if no schedule can take it
    (sim/schedulers seed_problem): the member printed and the replay line are then the seed's own."""
    from triton_dist.cli import CliError
    from . import schedulers
    why = schedulers.seed_problem(seed)
    if why is not None:
        raise CliError(f"{option} {why}")


def _launch(args, seed=None, trace=None, events=None):
    """One launch of the script; session defaults are restored afterwards (the CLI may be
    called in-process, e.g. from tests)."""
    import triton_dist
    from .launch import SESSION
    warm(args.script)
    saved = dict(SESSION)
    # a str.format template (sim/launch.py fills in schedule and seed): braces in the
    # script's path or arguments are doubled
    SESSION["replay_cmd"] = replay_line(args, "\0S", "\0D").replace("{", "{{").replace("}", "}}") \
        .replace("\0S", "{schedule}").replace("\0D", "{seed}")
    if events is not None:
        SESSION["events"] = events
    from triton_dist import launcher
    saved_hint = dict(launcher.FAILURE_HINT)
    launcher.FAILURE_HINT["free"] = (
        f"this run used the free schedule, which does not replay: reproduce it under a deterministic schedule "
        f"with `{command(args, 'explore', ['--seeds', '50'], race_check=False)}` and check it for races with "
        f"`{command(args, 'run', [], race_check=True)}`")
    try:
        return triton_dist.launch(run_script, args.script, args.args, bool(getattr(args, "shmem_compat", False)),
                                  world_size=args.nproc,
                                  schedule=args.schedule, seed=seed, memory_model=args.memory_model,
                                  timeout=args.timeout, trace=trace,
                                  race_check=bool(getattr(args, "race_check", False)))
    finally:
        SESSION.clear()
        SESSION.update(saved)
        launcher.FAILURE_HINT.clear()
        launcher.FAILURE_HINT.update(saved_hint)


# --- run --------------------------------------------------------------------------------------

def configure_run(p):
    _common(p)
    p.add_argument("--seed", type=int, default=None, help="seed of a random/pct schedule")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace of the run")


def run(args) -> int:
    _check(args)
    _check_seed("--seed", args.seed)
    import triton_dist
    try:
        res = _launch(args, seed=args.seed, trace=args.trace)
    except LAUNCH_FAILURES as e:
        print(str(e), file=sys.stderr)
        return 1
    tail = f" (schedule {res.schedule}, seed {res.seed}, digest {res.schedule_digest})" \
        if res.schedule != "free" else ""
    print(f"triton-dist: {args.nproc} ranks finished in {res.wall_seconds:.2f} s{tail}", file=sys.stderr)
    if args.trace:
        print(f"triton-dist: trace written to {args.trace}", file=sys.stderr)
    return 0


# --- explore ----------------------------------------------------------------------------------

_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")


def diagnosis(e) -> str:
    """The device model's most relevant finding on a failure ('[fence] rank 1 core 0 loaded ...'),
    as replay prints it first under 'what the device model saw'; '' when it saw nothing."""
    evidence = getattr(e, "evidence", None) or []
    return evidence[0] if evidence and evidence[0].startswith("[") else ""


def failure_kind(e) -> str:
    """What tells one failure from another: the diagnosis's kind ('[fence]'), then the failure's
    type and first line, numbers blanked (one seed's stale read and another's are one kind)."""
    import triton_dist
    if isinstance(e, triton_dist.RankError):
        first = f"{e.exc_type}: {e.message.splitlines()[0] if e.message else ''}"
    else:
        first = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    label = diagnosis(e).split("]", 1)[0] + "] " if diagnosis(e) else ""
    return label + _NUMBERS.sub("N", first)


def configure_explore(p):
    _common(p, schedule_default="explore", remainder=False)
    p.add_argument("--seeds", type=int, default=100, help="how many seeds to try")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--shard", metavar="I/N", default=None,
                   help="try only the seeds s with s mod N == I (one machine of N; triton_dist/seed_shards.py) "
                        "and write what was found to --results; `triton-dist explore-merge` joins the shards")
    p.add_argument("--results", metavar="FILE.json", default=None,
                   help="with --shard: where to write this shard's results (default "
                        ".triton_dist/seed-shards/explore-SCRIPT-shard-I-of-N.json)")


def _progress(i, total, passed, failed, width=30):
    done = int(width * i / total)
    sys.stderr.write(f"\r[{'#' * done}{'.' * (width - done)}] {i}/{total}  passed {passed}  failed {failed}")
    sys.stderr.flush()


def explore(args) -> int:
    _check(args)
    from triton_dist.cli import CliError
    import triton_dist
    if args.schedule == "free":
        raise CliError("explore needs a deterministic schedule: --schedule explore, aware, random or pct")
    if args.seeds < 1:
        raise CliError(f"--seeds must be at least 1, got {args.seeds}")
    _check_seed("--first-seed", args.first_seed)
    from . import schedulers
    if args.first_seed + args.seeds - 1 > schedulers.SEED_MAX:
        raise CliError(f"--first-seed {args.first_seed} with --seeds {args.seeds} runs past the last seed "
                       f"2**64-1 ({schedulers.SEED_MAX}); start lower or try fewer seeds")
    from triton_dist import seed_shards
    shard = None
    if args.shard is not None:
        try:
            shard = seed_shards.parse(args.shard)
        except seed_shards.ShardError as e:
            raise CliError(f"--shard: {e}") from None
    elif args.results is not None:
        raise CliError("--results names the file of a shard: give --shard I/N with it")
    todo = seed_shards.seeds(args.first_seed, args.seeds, shard)
    kinds = {}          # kind -> [first seed, count, message]
    passed = 0
    t0 = time.monotonic()
    tty = sys.stderr.isatty()
    tried = 0
    race = None
    for i, seed in enumerate(todo):
        tried += 1
        try:
            _launch(args, seed=seed)
            passed += 1
        except LAUNCH_FAILURES as e:
            k = failure_kind(e)
            if k not in kinds:
                digest = getattr(e, "schedule_digest", "") or getattr(getattr(e, "result", None), "schedule_digest", "")
                kinds[k] = [seed, 0, str(e).splitlines()[0], digest, diagnosis(e)]
            kinds[k][1] += 1
            if isinstance(e, triton_dist.RaceError) or getattr(e, "races", None):
                race = (seed, e)        # a failed launch is race-checked too (sim/launch.py)
        if tty or (i + 1) % 10 == 0 or i + 1 == len(todo) or race:
            _progress(i + 1, len(todo), passed, sum(v[1] for v in kinds.values()))
            if not tty:
                sys.stderr.write("\n")
        if race:        # happens-before does not depend on the seed: every seed finds this race
            break
    if tty:
        sys.stderr.write("\n")
    print(f"explored {tried} seeds of schedule {args.schedule} on {args.nproc} ranks in "
          f"{time.monotonic() - t0:.1f} s: {passed} passed, {tried - passed} failed")
    if race:
        print(f"stopped at seed {race[0]}, the first with a race (the race detector finds the same races "
              f"under every seed):")
        print(str(race[1]))
    # grouped by the device model's diagnosis, one example each: the finding replay prints first
    for kind, (seed, count, first, digest, why) in sorted(kinds.items(), key=lambda kv: kv[1][0]):
        label = why.split("]", 1)[0] + "] " if why else ""
        print(f"  {count:4d} x {label}{first}")
        if why:
            print(f"         the device model saw: {why}")
        print(f"         first seed {seed} (digest {digest or '-'}); replay: "
              f"{replay_line(args, args.schedule, seed)}")
    if shard is not None:
        path = args.results or seed_shards.default_path(
            "explore", shard, os.path.splitext(os.path.basename(args.script))[0])
        seed_shards.write(path, source="explore", shard=shard, first=args.first_seed, count=args.seeds,
                          schedule=args.schedule, tried=tried, failures={
                              kind: {"seed": seed, "count": count, "message": first,
                                     "replay": replay_line(args, args.schedule, seed)}
                              for kind, (seed, count, first, digest, _why) in kinds.items()})
        print(f"shard {shard[0]}/{shard[1]} (seeds s with s mod {shard[1]} == {shard[0]}) written to {path}; "
              f"join the shards with `triton-dist explore-merge FILES...`")
    return 0 if passed == tried and not race else 1


# --- replay -----------------------------------------------------------------------------------

def configure_replay(p):
    _common(p, schedule_default="pct", remainder=False)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--events", type=int, default=40, help="how many of the last events to print")
    p.add_argument("--trace", metavar="OUT.json", help="write the whole run as a Chrome/Perfetto trace")


def replay(args) -> int:
    _check(args)
    _check_seed("--seed", args.seed)
    from triton_dist.cli import CliError
    import triton_dist
    if args.schedule == "free":
        raise CliError("replay needs a deterministic schedule: --schedule explore, aware, random or pct")
    try:
        res = _launch(args, seed=args.seed, trace=args.trace, events=args.events)
    except LAUNCH_FAILURES as e:
        print(str(e))
        if hasattr(e, "schedule_digest"):
            print(f"schedule digest {e.schedule_digest}")
            print(e.events)
        if args.trace:
            print(f"trace written to {args.trace}")
        return 1
    print(f"seed {args.seed} of schedule {args.schedule} passed on {args.nproc} ranks "
          f"({res.steps} steps, digest {res.schedule_digest})")
    if args.trace:
        print(f"trace written to {args.trace}")
    return 0


def _subcommand(name, order, help, configure, handler):
    from triton_dist.cli import Subcommand
    return Subcommand(name, help, configure, handler, order=order)


RUN = _subcommand("run", 10, "run a script as N simulated ranks, like torchrun", configure_run, run)
EXPLORE = _subcommand("explore", 20, "run a script under many seeds of a deterministic schedule and "
                      "summarize the outcomes", configure_explore, explore)
REPLAY = _subcommand("replay", 30, "rerun one seed, print the last events before the failure, "
                     "optionally write a Chrome/Perfetto trace", configure_replay, replay)
