"""The front half of the NPU path on a CPU: triton-ascend's own frontend traces the kernel
library to TTIR, with the dl ops emitted through its builder.

triton-ascend installs the same `triton/` package as the simulator's stock triton, so it
lives in an environment of its own: point TRITON_DIST_TRITON_ASCEND_PYTHON at that
environment's python (or run the suite with it).  The check then runs there, in a child:
- triton_dist's capability check must describe that triton-ascend (backend 'npu' refuses
  a triton-ascend that cannot run distributed kernels, naming what to install);
- each library kernel is traced to TTIR by triton-ascend's frontend for an NPU target, and
  must carry the same distributed ops as stock Triton's frontend gives here.
Where the triton-ascend there cannot trace them, the test skips with the reason (the only
PyPI release, 3.2.0, cannot: docs/ascend.md); where it claims it can and fails, it fails.
"""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = "TRITON_DIST_TRITON_ASCEND_PYTHON"
DATA = os.path.join(ROOT, "tests", "data", "kernel_signatures.json")
LIBRARY = ("_gather_kernel", "_reduce_kernel", "_ring_kernel", "_ag_gemm_kernel", "_gemm_rs_kernel")


def _python():
    """(python with triton-ascend, None) or (None, why not)."""
    from triton_dist.requirements import triton_is_ascend
    if os.environ.get(ENV):
        return os.environ[ENV], None
    if triton_is_ascend():
        return sys.executable, None
    return None, (f"no triton-ascend here: it installs the same `triton/` package as the simulator's stock triton, "
                  f"so it needs its own environment; set {ENV}=/path/to/that/env/bin/python.  (The only PyPI "
                  f"release, triton-ascend 3.2.0, cannot trace distributed kernels: docs/ascend.md)")


PY, WHY = _python()
needs_triton_ascend = pytest.mark.skipif(PY is None, reason=WHY or "")


def _cases():
    data = json.load(open(DATA))["recorded"]
    out = {}
    for name in LIBRARY:
        key = next(k for k in data if k.endswith("::" + name))
        e = data[key][0]
        out[name] = (key.split("::")[0], e["signature"], e["constexprs"])
    return out


CHILD = textwrap.dedent(r'''
    import inspect, json, os, re, sys, traceback
    os.environ["TRITON_DIST_BACKEND"] = "npu"
    sys.path.insert(0, ROOT)
    out = {"problems": [], "results": {}}
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location("R", os.path.join(ROOT, "triton_dist", "requirements.py"))
        requirements = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(requirements)
        out["import_problems"] = requirements.problems("npu")
        if out["import_problems"]:              # `import triton_dist` refuses this triton: nothing to trace
            print("RESULT " + json.dumps(out))
            sys.exit(0)
        import triton
        out["triton"] = triton.__version__
        from triton_dist.backend_ascend import npu_compile
        out["version"] = npu_compile.triton_ascend_version()
        out["problems"] = npu_compile.triton_ascend_problems()
        import triton_dist
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.compiler.compiler import make_backend
        from triton._C.libtriton import ir
        import triton.language as tl
        from triton_dist.kernels import collectives, gemm
        target = GPUTarget("npu", "Ascend910B4", 0)
        backend = make_backend(target)
        options = backend.parse_options({})
        for name, (file, sig, consts) in CASES.items():
            fn = getattr(collectives if "collectives" in file else gemm, name)
            consts = {k: getattr(tl, v["dtype"]) if isinstance(v, dict) else v for k, v in consts.items()}
            try:
                context = ir.context(); ir.load_dialects(context); backend.load_dialects(context)
                src = ASTSource(fn, sig, consts)
                params = inspect.signature(src.make_ir).parameters
                if "target" in params:
                    codegen = backend.get_codegen_implementation(options)
                    mod = src.make_ir(target, options, codegen, backend.get_module_map(), context)
                else:
                    mod = src.make_ir(options, backend.get_codegen_implementation(), backend.get_module_map(),
                                      context)
                text = str(mod)
                out["results"][name] = {"ok": True, "ops": sorted(set(re.findall(r'triton_dist\.op = "(\w+)"', text))),
                                        "symbols": sorted(set(re.findall(r'symbol = "(aclshmem\w+)"', text)))}
            except Exception as e:
                cause = e
                while cause.__cause__ is not None:
                    cause = cause.__cause__
                out["results"][name] = {"ok": False, "error": f"{type(e).__name__}: {e}",
                                        "cause": f"{type(cause).__name__}({str(cause)!r})"}
    except Exception as e:
        out["fatal"] = traceback.format_exc()
    print("RESULT " + json.dumps(out))
''')


CASES = _cases()


def _stock(name):
    import triton.language as tl

    from triton_dist.backend_ascend.frontend import build_ttir
    from triton_dist.kernels import collectives, gemm
    file, sig, consts = CASES[name]
    fn = getattr(collectives if "collectives" in file else gemm, name)
    consts = {k: getattr(tl, v["dtype"]) if isinstance(v, dict) else v for k, v in consts.items()}
    module, _ = build_ttir(fn, sig, consts)
    text = module.str_nodebug()
    return (sorted(set(re.findall(r'triton_dist\.op = "(\w+)"', text))),
            sorted(set(re.findall(r'symbol = "(aclshmem\w+)"', text))))


@pytest.fixture(scope="module")
def child():
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([PY, "-c", f"ROOT = {ROOT!r}\nCASES = {CASES!r}\n" + CHILD], capture_output=True,
                          text=True, env=env, timeout=600, cwd="/")
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, f"the triton-ascend child printed no result (rc {proc.returncode}):\n{proc.stderr[-4000:]}"
    out = json.loads(line[len("RESULT "):])
    assert "fatal" not in out, out["fatal"]
    return out


@needs_triton_ascend
def test_the_import_check_knows_the_generation(child):
    """requirements.check: the `_builder` generation (3.2.x) is refused at import naming the
    supported lines; the main line (`_semantic`) is not."""
    problems = child["import_problems"]
    if problems:
        assert "`_builder` generation" in problems[0] and "triton-ascend's main line" in problems[0], problems
    else:
        assert child["results"], child


@needs_triton_ascend
@pytest.mark.parametrize("name", LIBRARY)
def test_triton_ascend_traces_the_library(child, name):
    if child["import_problems"]:
        pytest.skip(f"import triton_dist refuses this triton-ascend: {child['import_problems'][0]}")
    result = child["results"][name]
    tracing = [p for p in child["problems"] if "driver" not in p]      # the driver matters at launch only
    if not result["ok"]:
        if tracing:
            pytest.skip(f"triton-ascend {child.get('version')} cannot trace distributed kernels: {result['cause']}; "
                        f"the capability check says: {' | '.join(tracing)}")
        pytest.fail(f"triton-ascend {child.get('version')} passes the capability check but fails to trace "
                    f"{name}: {result['error']}")
    assert not tracing, f"the capability check refuses a triton-ascend that traces the library: {tracing}"
    assert (result["ops"], result["symbols"]) == _stock(name)
