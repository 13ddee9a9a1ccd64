"""docs/corpus.md's table of the Ascend corpus (tests/ascend_corpus), measured: every case run on the simulator
against torch, compiled by the real NPU compilers, and run as they compiled it on the `hivm` backend (on this CPU),
as tests/test_ascend_corpus.py does (`--backend sim,hivm`).

    .venv/bin/python scripts/corpus_table.py            # prints the markdown table
    .venv/bin/python scripts/corpus_table.py --docs   # also writes it into docs/corpus.md between
                                                        # <!-- corpus:begin --> and <!-- corpus:end -->

A cell says what was measured, never what was expected: "matches torch", the simulator's own first
line when it reports something, "accepted" / the compiler's refusal line / "cannot lower" (a form
triton-ascend 3.2.0's adapter has no counterpart for), one per compiled config.  A cell that differs
from the case's expectation (its torch oracle, its declared verdict) is marked **unexpected**.  The hivm
cell: "matches torch", the fault it reports where the simulator reports one, or a known difference the
case declares (Case.on_backend, or its compile declared refused) with the text the run showed.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "docs", "corpus.md")   # the page that holds the table
BEGIN, END = "<!-- corpus:begin -->", "<!-- corpus:end -->"
sys.path.insert(0, os.path.join(ROOT, "tests"))


def _first_line(text: str, limit: int = 110) -> str:
    line = next((x for x in str(text).splitlines() if x.strip()), "")
    line = re.sub(r"\s+", " ", re.sub(r" at 0x[0-9a-f]+", "", line)).replace("|", "\\|")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def simulator_cell(case) -> str:
    import test_ascend_corpus as T
    import triton_dist
    try:
        reported = T.check_on_simulator(case)
    except AssertionError as e:
        seed = re.search(r"\(random schedule, seed (\d+)\)", str(e))
        if " differs from torch" in str(e) or " != torch" in str(e):
            return "**unexpected**: differs from torch" + (f" (random schedule, seed {seed[1]})" if seed else "")
        return f"**unexpected**: {_first_line(e)}"
    except triton_dist.RankError as e:
        return f"**unexpected**: {_first_line(str(e).replace('rank 0 raised ', ''))}"
    if case.sim_error:
        return f"reports, as it must: {_first_line(reported, 200)}"
    return "matches torch" + (f" under {len(case.seeds)} seeds" if case.seeds else "")


def hivm_cell(case) -> str:
    import test_ascend_corpus as T
    import triton_dist
    from triton_dist import registry
    missing = registry.backend_class("hivm").missing()
    if missing:
        return "skipped: " + _first_line("; ".join(missing), 60)
    differs = T.expected_difference(case, "hivm")
    try:
        reported = T.check_on_simulator(case, "hivm")
    except (AssertionError, triton_dist.RankError) as e:
        text = str(e)
        shown = re.search(differs.shows, text, re.S) if differs is not None else None
        if shown and differs.kind != "reports the fault":
            return f"{differs.kind}, as declared: {_first_line(shown.group(0), 150)}"
        if " differs from torch" in text or " != torch" in text:
            return "**unexpected**: differs from torch"
        return f"**unexpected**: {_first_line(text.replace('rank 0 raised ', ''))}"
    if differs is not None and differs.kind == "reports the fault":
        return f"reports, as it must: {_first_line(reported, 200)}"
    if differs is not None:
        return f"**unexpected**: matches torch (declared: {differs.kind})"
    return "matches torch" + (f" under {len(case.seeds)} seeds" if case.seeds else "")


def _verdict(case, c, tools) -> tuple[str, bool]:
    """(what the compilers said, whether it is the declared verdict)."""
    from triton_dist.backend_ascend import cache, pipeline
    from triton_dist.backend_ascend.extension_ops import CannotLower
    from triton_dist.errors import TritonDistError
    try:
        out = pipeline.compile_kernel(case.jit, c.signature, c.constexprs, cache=cache.Cache(), tools=tools)
    except CannotLower:
        return "cannot lower (3.2.0 adapter)", c.expect == "cannot lower"
    except TritonDistError as e:
        return f"the frontend refuses it: {_first_line(e, 60)}", False
    except Exception as e:  # noqa: BLE001 - the table reports it rather than stopping
        return f"not compiled: {type(e).__name__}: {_first_line(e, 70)}", False
    if out.accepted:
        return "accepted", c.expect == "accepted"
    line = next((e for e in out.errors if c.expect in e), out.errors[0] if out.errors else "refused")
    ub = re.search(r"ub overflow, requires (\d+) bits while (\d+) bits available", line)
    if ub:
        line = f"ub overflow ({int(ub[1]) // 8192} of {int(ub[2]) // 8192} KiB)"
    return f"refused: {_first_line(line, 60)}", c.expect != "accepted" and c.expect in " ".join(out.errors)


def compile_cell(case, tools) -> str:
    if tools.missing:
        return "skipped: " + _first_line("; ".join(tools.missing), 60)
    cells = []
    for c in case.compiles:
        what, as_declared = _verdict(case, c, tools)
        cfg = ""
        if len(case.compiles) > 1:
            cfg = " (" + ", ".join(f"{k}={v}" for k, v in c.constexprs.items()) + ")"
        cells.append(("" if as_declared else "**unexpected**: ") + what + cfg)
    return "; ".join(cells)


def table(only=None) -> tuple[str, dict]:
    import test_ascend_corpus as T
    from ascend_corpus import all_cases
    from triton_dist.backend_ascend import toolchain
    tools = toolchain.find()
    rows = ["| kernel | family | written in the style of | simulator (world size 1) | npu-compile (triton-ascend 3.2.0 "
            "adapter + bishengir-compile 1.2.0) | hivm: the compiled kernel on this CPU (world size 1) |",
            "| --- | --- | --- | --- | --- | --- |"]
    counts = {"cases": 0, "sim ok": 0, "compile as declared": 0, "hivm matches": 0, "hivm as declared": 0}
    for case in all_cases():
        if only and case.name not in only:
            continue
        t0 = time.monotonic()
        sim = simulator_cell(case)
        comp = compile_cell(case, tools)
        hivm = hivm_cell(case)
        for test in ("test_matches_torch", "test_npu_compile"):      # a known gap: say so, with the xfail's reason
            gap = T.XFAIL.get(f"{test}[{case.name}]")
            cell = sim if test == "test_matches_torch" else comp
            if gap and "**unexpected**" in cell:
                cell += f" (known gap: {_first_line(gap.split(': ', 1)[-1], 70)})"
                sim, comp = (cell, comp) if test == "test_matches_torch" else (sim, cell)
        counts["cases"] += 1
        counts["sim ok"] += "**unexpected**" not in sim
        counts["compile as declared"] += "**unexpected**" not in comp and not comp.startswith("skipped")
        counts["hivm matches"] += hivm.startswith(("matches torch", "reports, as it must"))
        counts["hivm as declared"] += ", as declared: " in hivm
        repo, path = case.style.split(": ")
        rows.append(f"| `{case.name}` | {case.family} | {repo} `{path}` | {sim} | {comp} | {hivm} |")
        print(f"[corpus] {case.name}: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return "\n".join(rows), counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", "--readme", dest="readme", action="store_true",
                    help="write the table into docs/corpus.md between the markers")
    ap.add_argument("cases", nargs="*", help="only these cases (names)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    text, counts = table(set(args.cases) or None)
    import triton
    summary = (f"{counts['cases']} cases: {counts['sim ok']} as expected on the simulator, "
               f"{counts['compile as declared']} with the declared npu-compile verdicts, "
               f"{counts['hivm matches']} as the simulator on hivm and {counts['hivm as declared']} with its declared "
               f"difference there "
               f"(measured by scripts/corpus_table.py on {time.strftime('%Y-%m-%d', time.gmtime())}, "
               f"triton {triton.__version__}).")
    print(text + "\n\n" + summary)
    if args.readme:
        if args.cases:
            raise SystemExit("--docs writes the whole corpus: leave out the case names")
        with open(README) as f:
            readme = f.read()
        if BEGIN not in readme or END not in readme:
            raise SystemExit(f"docs/corpus.md has no {BEGIN} ... {END} markers: add them where the table goes")
        head, rest = readme.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        with open(README, "w") as f:
            f.write(head + BEGIN + "\n" + text + "\n\n" + summary + "\n" + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
