"""The HIVM the Ascend lowering emits, parsed and verified by AscendNPU-IR's own bishengir-opt.

Oracle: bishengir-opt 1.2.0 (PyPI ascendnpu-ir, the test extra), whose HIVM dialect parses
and verifies `hivm.hir.custom` (its verifier rejects, e.g., a custom op without a pipe or
with results that do not match its outs).  Checked:
- every form the lowering can produce: every op x every element type it takes x both
  core types (tests/hivm_forms.py), as the NPU's ttadapter pre-step emits it (with the
  bitcode attribute of each op's wrapper variant);
- every kernel of the kernel library, the examples and the tests, with the signatures they
  were launched (or lowered) with (tests/data/kernel_signatures.json, recorded by
  scripts/record_kernel_signatures.py; "manual" for kernels that only run on NPUs).
Where the wheel is not available (it is published for CPython 3.11 on x86_64 Linux only)
the tests skip, saying so.
"""
import ast
import importlib
import importlib.util
import json
import os
import sys

import pytest

import hivm_forms as H
from triton_dist import symbols as S

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "kernel_signatures.json")
OPT, WHY = H.bishengir_opt()
needs_opt = pytest.mark.skipif(OPT is None, reason=WHY or "")


def _core_of(op):
    return op.split("hivm.tcore_type = #hivm.tcore_type<", 1)[1].split(">", 1)[0]


# --- the verifier is live --------------------------------------------------------------------------
@needs_opt
def test_bishengir_opt_is_the_pinned_release():
    import subprocess
    out = subprocess.run([OPT, "--version"], capture_output=True, text=True, timeout=60).stdout
    assert f"bishengir-opt {H.BISHENGIR_VERSION}" in out, out


@needs_opt
def test_the_verifier_rejects_broken_forms():
    """Negative controls, so that a pass means something: the CustomOp verifier's own rules."""
    text = H.lower_npu(H.f_wait, {"sig": "*i32", "out": "*i32", **H.DOT_SIG}, {"DOT": False})
    (op, params), = H.forms(text).items()
    assert H.verify_forms(OPT, {op: params}) == {}
    no_pipe = op.replace("hivm.pipe = #hivm.pipe<PIPE_S>, ", "")
    assert "Missing pipe information" in H.verify_forms(OPT, {no_pipe: params})[no_pipe]
    bad_core = op.replace("tcore_type<VECTOR>", "tcore_type<VEC>")
    assert "expected ::mlir::hivm::TCoreType to be one of" in H.verify_forms(OPT, {bad_core: params})[bad_core]


# --- every form: ops x dtypes x core types -------------------------------------------------------------
GRID = H.grid()


@needs_opt
@pytest.mark.parametrize("core", list(H.CORE_TYPES))
@pytest.mark.parametrize("case", GRID, ids=[c[0] for c in GRID])
def test_every_form_parses_and_verifies(case, core):
    cid, fn, sig, consts = case
    has_dot = H.CORE_TYPES[core]
    text = H.lower_npu(fn, sig, {**consts, "DOT": has_dot})
    found = H.forms(text)
    assert found, f"{cid}: no hivm.hir.custom in\n{text}"
    cores = {_core_of(op) for op in found}
    # docs/semantics.md §6: in a module with a dot the ops outside the prefix table are
    # CUBE_AND_VECTOR; without one, only aclshmem_barrier_all is.
    if cid.startswith(("ids", "ptr", "notify", "wait", "consume")):
        assert cores == {core}, (cid, core, cores)
    bad = H.verify_forms(OPT, found)
    assert not bad, "bishengir-opt rejects:\n" + "\n\n".join(f"{op}\n  {err}" for op, err in bad.items())


def test_the_grid_covers_every_op_of_the_table():
    """Every dl / libshmem_device op of triton_dist/symbols.py is in the grid, with every element
    type its symbol is typed by."""
    import inspect
    src = "".join(inspect.getsource(fn.fn if hasattr(fn, "fn") else fn) for fn in
                  {c[1] for c in GRID})
    for op in S.DL_OPS:
        assert f"dl.{op}(" in src, op
    for op in S.SHMEM_OPS:
        assert f"shm.{op}(" in src, op
    typed = {c[0].split("-")[1] for c in GRID if c[0].startswith(("ptr-", "consume-", "rma-"))}
    assert typed == set(H.ALL_DTYPES)
    assert {c[0].split("-")[1] for c in GRID if c[0].startswith("wait-")} == set(H.WAIT_DTYPES)


# --- every kernel of the library, the examples and the tests -------------------------------------------
def _signatures():
    data = json.load(open(DATA))
    out = {}
    for section in ("recorded", "manual"):
        for key, entries in data.get(section, {}).items():
            out.setdefault(key, [])
            for e in entries:
                if e not in out[key]:
                    out[key].append(e)
    return out, data.get("refused", {})


SIGNATURES, REFUSED = _signatures()


def _module(file):
    if file.startswith("tests/"):
        name = os.path.splitext(os.path.basename(file))[0]
        if os.path.join(ROOT, "tests") not in sys.path:
            sys.path.insert(0, os.path.join(ROOT, "tests"))
        return importlib.import_module(name)
    if file.startswith("examples/"):
        name = "triton_dist_example_" + os.path.splitext(os.path.basename(file))[0]
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, file))
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        return sys.modules[name]
    return importlib.import_module(os.path.splitext(file)[0].replace("/", "."))


def _distinct(entries):
    """The entries that can lower differently: integer constexprs above 1 are sizes (tiles,
    block lengths), which change no distributed op; 0/1, bools and strings select code."""
    seen, out = set(), []
    for e in entries:
        key = (tuple(sorted(e["signature"].items())),
               tuple(sorted((k, json.dumps(v)) for k, v in e["constexprs"].items()
                            if not (type(v) is int and v > 1))))
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def _constexprs(consts):
    import triton.language as tl
    return {k: tl.dtype(v["dtype"]) if isinstance(v, dict) else v for k, v in consts.items()}   # a dtype by its name (fp32)


SOURCES = (["triton_dist/kernels/" + f for f in sorted(os.listdir(os.path.join(ROOT, "triton_dist", "kernels")))]
           + ["examples/" + f for f in sorted(os.listdir(os.path.join(ROOT, "examples")))]
           + ["tests/" + f for f in sorted(os.listdir(os.path.join(ROOT, "tests")))
              if f != "hivm_forms.py"])                # the grid: test_every_form_parses_and_verifies
DIST_NAMES = {"dl", "shm", "libshmem_device"}


def distributed_kernels(path):
    """Module-level @triton.jit functions of a file that use dl / libshmem_device and that no
    other @triton.jit function of the file calls (those are helpers, inlined into kernels)."""
    tree = ast.parse(open(os.path.join(ROOT, path)).read())
    jitted = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            jitted[node.name] = node
    called = set()
    for node in jitted.values():
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in jitted:
                called.add(sub.func.id)
    out = []
    for name, node in jitted.items():
        uses = any(isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id in DIST_NAMES
                   for sub in ast.walk(node))
        if uses and name not in called:
            out.append(name)
    return out


def _referencing(tree, names):
    """Module-level functions and variables (case tables) whose definitions mention `names`."""
    out = set()
    for node in tree.body:
        mentions = any(isinstance(sub, ast.Name) and sub.id in names for sub in ast.walk(node))
        if not mentions:
            continue
        if isinstance(node, ast.FunctionDef):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def _tests_launching(path, kernel):
    """The test functions of `path` that mention `kernel`, directly or through one helper or table."""
    tree = ast.parse(open(os.path.join(ROOT, path)).read())
    direct = _referencing(tree, {kernel})
    through = _referencing(tree, direct | {kernel})
    return sorted(n for n in through if n.startswith("test"))


UNRECORDED = sorted(f"{path}::{name}" for path in SOURCES if path.endswith(".py")
                    for name in distributed_kernels(path) if f"{path}::{name}" not in SIGNATURES)


@pytest.fixture(scope="session")
def fresh_signatures(tmp_path_factory):
    """Signatures of the kernels tests/data/kernel_signatures.json lacks, recorded now by running
    the tests that launch them under scripts/record_kernel_signatures.py (once per session,
    shared by pytest-xdist workers)."""
    import fcntl
    import subprocess
    root = tmp_path_factory.getbasetemp().parent
    out = root / "fresh_kernel_signatures.json"
    with open(root / "fresh_kernel_signatures.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            nodes = sorted({f"{key.split('::')[0]}::{t}" for key in UNRECORDED
                            for t in _tests_launching(*key.split("::"))})
            rec = root / "fresh_launches.jsonl"
            rec.write_text("")
            if nodes:
                env = dict(os.environ, TRITON_DIST_RECORD=str(rec), PYTHONPATH=os.pathsep.join(
                    [os.path.join(ROOT, "scripts"), os.environ.get("PYTHONPATH", "")]))
                subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                                "-p", "record_kernel_signatures", *nodes], cwd=ROOT, env=env,
                               capture_output=True, timeout=900)
            sys.path.insert(0, os.path.join(ROOT, "scripts"))
            from record_kernel_signatures import merge
            found = {}
            for line in rec.read_text().splitlines():
                merge(found, json.loads(line))
            out.write_text(json.dumps(found))
    return json.loads(out.read_text())


@needs_opt
@pytest.mark.parametrize("key", sorted(SIGNATURES) + UNRECORDED)
def test_every_kernel_lowers_to_verified_hivm(key, request):
    """A kernel without a signature in the data file is verified with the signatures its tests
    launch it with, recorded now; if none of its tests launches it, it fails, saying what to do."""
    from triton_dist.errors import TritonDistError
    file, name = key.split("::")
    entries = SIGNATURES.get(key) or request.getfixturevalue("fresh_signatures").get(key)
    assert entries, (f"{key} has distributed ops but no signature: no test of {file} launches it on the simulator "
                     f"({_tests_launching(file, name) or 'none mentions it'}); add its signature to "
                     f"tests/data/kernel_signatures.json under \"manual\"")
    kernel = getattr(_module(file), name, None)
    assert kernel is not None, (f"{key} is in tests/data/kernel_signatures.json but {file} defines no {name} any "
                                f"more; re-record with `.venv/bin/python scripts/record_kernel_signatures.py`")
    found = {}
    for entry in _distinct(entries):
        try:
            text = H.lower_npu(kernel, entry["signature"], _constexprs(entry["constexprs"]))
        except TritonDistError as e:
            if key in REFUSED:
                assert REFUSED[key] in str(e), (key, str(e))
                continue
            if "raised" in entry:       # the simulator refused this launch: the lowering must say the same
                rule = entry["raised"].split(": ", 1)[-1][-80:]
                assert rule in str(e), (f"{key}: the simulator refused this launch with\n  {entry['raised']}\n"
                                        f"but the lowering with\n  {e}")
                continue
            raise
        found.update(H.forms(text))
    bad = H.verify_forms(OPT, found) if found else {}
    assert not bad, f"{key}: bishengir-opt rejects:\n" + "\n\n".join(f"{op}\n  {err}" for op, err in bad.items())


def test_the_signature_file_covers_the_kernels():
    """Every kernel with distributed ops has its launch signatures recorded, so CI verifies it
    from the file instead of re-running its tests (test_every_kernel_lowers_... does that as a
    fallback, and says which)."""
    assert not UNRECORDED, (f"not in tests/data/kernel_signatures.json: {UNRECORDED}; record them with "
                            f"`.venv/bin/python scripts/record_kernel_signatures.py`")
