"""The API reference: every dl.* and libshmem_device.* builtin documents itself, and
docs/api.md is what scripts/gen_api_docs.py writes from those docstrings.

Oracles: AscendNPU-IR's wrapper list (tests/data/aclshmem_wrappers.txt, the symbols a lowered
kernel can link) for the Symbol each docstring names, and the one table
(triton_dist/symbols.py) for which symbol each op lowers to.
"""
import os
import re
import sys
from pathlib import Path

import pytest

from triton_dist import symbols as S

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import gen_api_docs as G  # noqa: E402

WRAPPERS = {ln.split()[0] for ln in (ROOT / "tests" / "data" / "aclshmem_wrappers.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")}
BUILTINS = [(prefix, mod, name) for _, prefix, mod, names in G.modules() for name in names]


def test_every_builtin_is_listed():
    import triton_dist.language as dl
    names = {(p, n) for p, _, n in BUILTINS}
    assert {("dl", n) for n in dl.__all__} <= names
    shm_ops = {n for p, n in names if p == "libshmem_device"}
    assert set(S.SHMEM_OPS) == shm_ops, set(S.SHMEM_OPS) ^ shm_ops     # the table's ops, no more, no less


@pytest.mark.parametrize("prefix, mod, name", BUILTINS, ids=[f"{p}.{n}" for p, _, n in BUILTINS])
def test_builtin_has_every_field(prefix, mod, name):
    doc = G.parse(getattr(mod, name).__doc__)
    assert doc.get("summary"), f"{prefix}.{name} has no summary"
    for field in G.FIELDS:
        assert len(doc.get(field, "")) >= 4, f"{prefix}.{name}: its docstring has no '{field}:' field"


def _concrete(template: str) -> list:
    """aclshmem_<type>_putmem -> the symbols it stands for, with the library's type names."""
    if "<type>" not in template:
        return [template]
    return [template.replace("<type>", t) for t in S.TYPE_NAMES.values()]


def _table_symbol(prefix, name):
    table = S.DL_OPS if prefix == "dl" else S.SHMEM_OPS
    spec = table.get(name)
    return None if spec is None else spec.symbol.replace("{type}", "<type>")


@pytest.mark.parametrize("prefix, mod, name", BUILTINS, ids=[f"{p}.{n}" for p, _, n in BUILTINS])
def test_symbol_field_names_the_tables_symbol_and_a_real_wrapper(prefix, mod, name):
    field = G.parse(getattr(mod, name).__doc__).get("Symbol", "")
    want = _table_symbol(prefix, name)
    if want is not None:
        assert want in field, f"{prefix}.{name}: Symbol says {field!r}, triton_dist/symbols.py maps it to {want}"
    named = re.findall(r"aclshmemx?_[A-Za-z0-9_<>]+", field)
    assert named or name == "extern_call", f"{prefix}.{name}: Symbol names no aclshmem symbol: {field!r}"
    for sym in named:
        sym = sym.rstrip("_")
        if sym.endswith("_ptr_<r>d"):                          # consume_token of an r-d pointer block
            sym = sym.replace("<r>", "1")
        hits = [c for c in _concrete(sym) if c in WRAPPERS]
        assert hits, f"{prefix}.{name}: {sym} is not a wrapper AscendNPU-IR defines"


def test_docs_api_md_is_generated_from_the_docstrings():
    text = (ROOT / "docs" / "api.md").read_text()
    assert text == G.render(), "docs/api.md is out of date: run .venv/bin/python scripts/gen_api_docs.py"


def test_docs_cite_only_what_the_repository_carries():
    """Semantics are cited from docs/semantics.md; no path outside the repository."""
    bad = []
    for path in [*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *ROOT.glob("triton_dist/**/*.py"),
                 *ROOT.glob("sim/**/*.py"), *ROOT.glob("sim/**/*.json"), *ROOT.glob("backend_*/**/*.py"),
                 *ROOT.glob("tests/*.py"), *ROOT.glob("scripts/*.py")]:
        text = path.read_text(errors="replace")
        for pattern in (r"(?<![\w/])SEMANTICS\.md", r"SEMANTICS §", r"/work/", r"\.\./shared", r"NPU_EVIDENCE"):
            if path.name == os.path.basename(__file__):
                continue
            for m in re.finditer(pattern, text):
                bad.append(f"{path.relative_to(ROOT)}: {text[max(0, m.start() - 30):m.end() + 10]!r}")
    assert not bad, "\n".join(bad)
    cited = set(re.findall(r"docs/semantics\.md §(\d)", " ".join(p.read_text(errors="replace") for p in
                                                              [*ROOT.glob("**/*.py"), *ROOT.glob("**/*.md")]
                                                              if ".venv" not in p.parts)))
    sections = set(re.findall(r"^## (\d)\.", (ROOT / "docs" / "semantics.md").read_text(), re.M))
    assert cited and cited <= sections, cited - sections
