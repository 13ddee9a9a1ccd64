"""Triton's own test_core.py, run as Triton's CI runs it under the interpreter, plain and on
the simulator (each test inside one simulated rank), and the per-case comparison.

    python benchmarks/triton_test_core.py --source DIR [--jobs 2] [--only plain|sim] [-k EXPR]

DIR holds Triton's `python/test/unit/language/test_core.py` and `python/test/conftest.py`
of the triton release that is installed (for 3.6.0: release/3.6.x at 7c56a5e4, "[release 3.6]
Release Triton to pypi (#9254)", whose triton/runtime/interpreter.py and
triton/_internal_testing.py are byte-identical to the 3.6.0 wheel's), e.g.
    git -C TRITON show 7c56a5e4:python/test/unit/language/test_core.py > DIR/test_core.py
    git -C TRITON show 7c56a5e4:python/test/conftest.py > DIR/conftest.py

The plain run is Triton's Makefile `test-interpret` target for this file:
`TRITON_INTERPRET=1 pytest -m interpreter language/test_core.py --device=cpu`, with every
TRITON_DIST* variable removed and triton_dist's pytest plugin off, so triton_dist is never
imported (the outside oracle).  The sim run is the same command plus benchmarks/in_rank_plugin.py,
which calls each test function inside `triton_dist.launch(world_size=1)`.  Both write JUnit
XML into --out (default benchmarks/results/test_core/); the comparison prints counts per
outcome and every case whose outcome differs, with the first line of its failure.

Long: test_core.py collects 9277 cases, 7407 of them marked `interpreter`; the plain run of
all of them took 34 min on the 2-core development machine at load ~20, the simulator needs
~1.5 s more per case (a rank started per test), hours for all.  `--sample-per-function K`
(benchmarks/test_core_sample.py) takes the first K cases of every test function in both
runs.  Run it in the background under nice; it is not part of CI.  docs/versions.md's table:
    python benchmarks/triton_test_core.py --source DIR --jobs 2 --sample-per-function 16
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_DIST")}
    env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)   # the plugins
    return env


def run(mode: str, work: Path, out: Path, jobs: int, kexpr: str | None, sample: int, extra: list) -> Path:
    xml = out / f"{mode}.xml"
    cmd = [sys.executable, "-m", "pytest", "test_core.py", "-m", "interpreter", "--device=cpu", "-q",
           "--tb=line", "-p", "no:cacheprovider", "-p", "no:triton_dist", f"--junitxml={xml}",
           "-p", "test_core_sample", f"--sample-per-function={sample}"]
    if jobs > 1:
        cmd += ["-n", str(jobs)]
    if kexpr:
        cmd += ["-k", kexpr]
    if mode == "sim":
        cmd += ["-p", "in_rank_plugin"]
    cmd += extra
    t0 = time.time()
    log = open(out / f"{mode}.log", "w")
    p = subprocess.run(cmd, cwd=work, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    log.close()
    print(f"[{mode}] exit {p.returncode} in {time.time() - t0:.0f} s; log {out / (mode + '.log')}", flush=True)
    return xml


def outcomes(xml: Path) -> dict:
    """{test id: (outcome, first line of the message)} from pytest's JUnit XML."""
    res = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name')}"
        kind, text = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                kind, text = "failed" if child.tag == "failure" else "error", child.get("message") or ""
            elif child.tag == "skipped":
                t = child.get("type") or ""
                kind = "xfailed" if "xfail" in t else "skipped"
                text = child.get("message") or ""
        res[name] = (kind, " ".join(text.split())[:300])
    return res


def compare(plain: dict, sim: dict) -> str:
    kinds = ("passed", "failed", "error", "skipped", "xfailed")
    lines = ["| outcome | plain interpreter | simulator (1 rank) |", "| --- | ---: | ---: |"]
    for k in kinds:
        lines.append(f"| {k} | {sum(1 for v in plain.values() if v[0] == k)} | "
                     f"{sum(1 for v in sim.values() if v[0] == k)} |")
    lines.append(f"| cases | {len(plain)} | {len(sim)} |")
    diff = [(n, plain.get(n, ('absent', '')), sim.get(n, ('absent', ''))) for n in sorted(set(plain) | set(sim))
            if plain.get(n, ('absent',))[0] != sim.get(n, ('absent',))[0]]
    lines.append("")
    lines.append(f"{len(diff)} cases differ:")
    for n, p, s in diff:
        lines.append(f"- {n}: plain {p[0]}, simulator {s[0]}: {s[1] or p[1]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, type=Path, help="folder with test_core.py and conftest.py")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "test_core")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--only", choices=("plain", "sim"))
    ap.add_argument("--compare-only", action="store_true", help="compare the XML files already in --out")
    ap.add_argument("-k", dest="kexpr")
    ap.add_argument("--sample-per-function", type=int, default=0, metavar="K",
                    help="run only the first K cases of each test function, in both runs (0: all)")
    args, extra = ap.parse_known_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    for f in ("test_core.py", "conftest.py"):
        src = args.source / f
        if not src.exists():
            ap.error(f"{src} is missing: see the docstring for where to take it from")
        shutil.copy(src, work / f)
    if not args.compare_only:
        for mode in ("plain", "sim"):
            if args.only in (None, mode):
                run(mode, work, out, args.jobs, args.kexpr, args.sample_per_function, extra)
    if (out / "plain.xml").exists() and (out / "sim.xml").exists():
        text = compare(outcomes(out / "plain.xml"), outcomes(out / "sim.xml"))
        (out / "comparison.md").write_text(text + "\n")
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
