"""Record the signature of every kernel launch of the test suite and the examples on the simulator.

    .venv/bin/python scripts/record_kernel_signatures.py          # rewrites tests/data/kernel_signatures.json

tests/test_hivm_verify.py lowers every kernel of the kernel library, the examples and the
tests with these signatures (argument types and constexpr values, as the kernels were
really launched) and has AscendNPU-IR's bishengir-opt verify the result;
tests/test_hivm_verify.py::test_every_kernel_has_a_signature fails, naming this script,
when a kernel with distributed ops has none.  Kernels that only run on real NPUs or GPUs
(never launched on the simulator) keep their hand-written entries under "manual".

The recording: a pytest plugin (this module, loaded with `-p`) wraps Triton's
InterpretedFunction.run in every process, ranks included (they are forked), and appends
one JSON line per distinct (kernel, signature) to $TRITON_DIST_RECORD.
"""
from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "kernel_signatures.json")
ENV = "TRITON_DIST_RECORD"

TORCH_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8",
               "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
               "uint64": "u64", "bool": "i1"}


def _json_value(v):
    v = getattr(v, "value", v) if type(v).__name__ == "constexpr" else v
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    name = getattr(v, "name", None)               # a tl.dtype
    if name is not None and type(v).__module__.startswith("triton"):
        return {"dtype": name}
    raise TypeError(type(v).__name__)


def _arg_type(v):
    if hasattr(v, "data_ptr") and hasattr(v, "dtype"):
        return "*" + TORCH_TYPES[str(v.dtype).replace("torch.", "")]
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        return "i32" if -2**31 <= v < 2**31 else "i64"
    if isinstance(v, float):
        return "fp32"
    raise TypeError(type(v).__name__)


def _where(fn):
    path = os.path.relpath(os.path.abspath(fn.__code__.co_filename), ROOT)
    return path, fn.__qualname__


def install_hook(path):
    import inspect

    from triton.runtime import interpreter
    from triton.runtime.jit import _normalize_ty

    orig = interpreter.InterpretedFunction.run
    if getattr(orig, "_recording", False):
        return
    seen = set()

    def run(self, *args, grid, warmup, **kwargs):
        line = None
        try:
            fn = self.fn
            bound = inspect.signature(fn).bind(*args, **kwargs)
            bound.apply_defaults()
            cx = {n for n, ty in fn.__annotations__.items() if _normalize_ty(ty) == "constexpr"}
            sig, consts = {}, {}
            for name, value in bound.arguments.items():
                if name in cx:
                    consts[name] = _json_value(value)
                else:
                    sig[name] = _arg_type(value)
            file, qualname = _where(fn)
            line = json.dumps({"file": file, "kernel": qualname, "signature": sig, "constexprs": consts},
                              sort_keys=True)
            if line not in seen:
                seen.add(line)
                with open(path, "a") as f:
                    f.write(line + "\n")
        except Exception:  # noqa: BLE001 - recording must never change what the kernel does
            pass
        try:
            return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
        except Exception as e:
            # a launch the language refuses (TritonDistError): the lowering must refuse it alike
            if line is not None and type(e).__name__ == "TritonDistError":
                raised = dict(json.loads(line), raised=str(e))
                with open(path, "a") as f:
                    f.write(json.dumps(raised, sort_keys=True) + "\n")
            raise

    run._recording = True
    interpreter.InterpretedFunction.run = run

    # kernels the tests only lower (tests/test_lowering.py, the CLI): their lowering signatures
    from triton_dist import backend_ascend
    lower = backend_ascend.lower

    def recording_lower(fn, signature, constexprs=None, **kwargs):
        out = lower(fn, signature, constexprs, **kwargs)
        try:
            f = getattr(fn, "fn", fn)
            file, qualname = _where(f)
            line = json.dumps({"file": file, "kernel": qualname, "signature": dict(signature),
                               "constexprs": {k: _json_value(v) for k, v in (constexprs or {}).items()}},
                              sort_keys=True)
            if line not in seen:
                seen.add(line)
                with open(path, "a") as fh:
                    fh.write(line + "\n")
        except Exception:  # noqa: BLE001
            pass
        return out

    backend_ascend.lower = recording_lower


# --- as a pytest plugin (-p record_kernel_signatures) -----------------------------------------------
def pytest_configure(config):
    if os.environ.get(ENV):
        import triton_dist  # noqa: F401 - the simulator's own patches go first
        install_hook(os.environ[ENV])


def _run_examples(path):
    os.environ[ENV] = path
    import triton_dist  # noqa: F401
    install_hook(path)
    for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
        if name.endswith(".py"):
            sys.argv = [name]
            try:
                runpy.run_path(os.path.join(ROOT, "examples", name), run_name="__main__")
            except SystemExit:
                pass


def merge(table, e):
    """Add launch record `e` to {key: [entries]}; a launch that raised marks its entry."""
    entries = table.setdefault(f"{e['file']}::{e['kernel']}", [])
    entry = {"signature": e["signature"], "constexprs": e["constexprs"]}
    for old in entries:
        if old["signature"] == entry["signature"] and old["constexprs"] == entry["constexprs"]:
            if "raised" in e:
                old["raised"] = e["raised"]
            return
    if "raised" in e:
        entry["raised"] = e["raised"]
    entries.append(entry)


def _in_repo(key):
    """Kernels of files in this repository, defined at module level (importable by name)."""
    file, kernel = key.split("::", 1)
    return not file.startswith("..") and "<locals>" not in kernel


def main(argv=None):
    """argv: test paths to run instead of all of tests/ (their kernels are merged into the
    file; the examples run only when all of tests/ runs)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    paths = argv or ["tests"]
    with tempfile.TemporaryDirectory() as tmp:
        rec = os.path.join(tmp, "launches.jsonl")
        open(rec, "w").close()
        env = dict(os.environ, **{ENV: rec}, PYTHONPATH=os.pathsep.join(
            [os.path.join(ROOT, "scripts"), os.environ.get("PYTHONPATH", "")]))
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "record_kernel_signatures",
                        "-p", "no:cacheprovider", *paths], cwd=ROOT, env=env, check=False)
        if not argv:
            subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {os.path.join(ROOT, 'scripts')!r}); "
                        f"import record_kernel_signatures as r; r._run_examples({rec!r})"], cwd=ROOT, env=env,
                           check=False)
        old = json.load(open(OUT)) if os.path.exists(OUT) else {}
        recorded = {k: v for k, v in old.get("recorded", {}).items() if _in_repo(k)} if argv else {}
        for line in open(rec):
            e = json.loads(line)
            if not _in_repo(f"{e['file']}::{e['kernel']}"):
                continue
            merge(recorded, e)
    data = {
        "about": old.get("about", "Signatures of every kernel launch of the test suite and the examples on the "
                                  "simulator (scripts/record_kernel_signatures.py); 'manual' holds kernels that "
                                  "only run on NPUs/GPUs.  Read by tests/test_hivm_verify.py."),
        "recorded": {k: sorted(v, key=lambda e: json.dumps(e, sort_keys=True)) for k, v in sorted(recorded.items())},
        "manual": old.get("manual", {}),
        "refused": old.get("refused", {}),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"{len(data['recorded'])} kernels recorded ({sum(map(len, data['recorded'].values()))} signatures) "
          f"-> {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
