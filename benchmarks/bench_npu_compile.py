"""The real NPU compile pipeline's cost per kernel, and what its cache saves.

    python benchmarks/bench_npu_compile.py [--repeat N]

For every kernel of the kernel library and the examples (their recorded launch signatures,
tests/data/kernel_signatures.json, one per kernel) and the kernels of tests/npu_compile_kernels.py,
in this one run on this machine:
  cold   a compile with an empty cache: frontend (TTIR), ttadapter (triton-adapter-opt),
         bishengir-compile (to hivmc), and the whole, min and median of N; its CPU time
         (this process and the tools it ran: what the compile costs whatever the load);
  disk   the verdict read back from the on-disk cache (a new session);
  memo   a repeated launch in the same process: the launch check itself (compile_check.check_launch
         on a Launch with tensors of the signature's dtypes), after its first call read the verdict.
The load (`uptime`) is printed with the figures: the machine is shared.
"""
import argparse
import json
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))


def _kernels():
    import importlib
    import importlib.util

    import triton.language as tl

    import npu_compile_kernels as K
    data = json.load(open(os.path.join(ROOT, "tests", "data", "kernel_signatures.json")))
    out = []
    for key, entries in sorted(data["recorded"].items()):
        file, name = key.split("::")
        if not file.startswith(("triton_dist/kernels/", "examples/")):
            continue
        if file.startswith("examples/"):
            spec = importlib.util.spec_from_file_location("bench_" + name, os.path.join(ROOT, file))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module(os.path.splitext(file)[0].replace("/", "."))
        e = entries[0]
        consts = {k: getattr(tl, v["dtype"]) if isinstance(v, dict) else v for k, v in e["constexprs"].items()}
        out.append((key, getattr(mod, name), e["signature"], consts))
    out.append(("tests/npu_compile_kernels.py::vector_add", K.vector_add,
                {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 1024}))
    out.append(("tests/npu_compile_kernels.py::put_to_peer", K.put_to_peer,
                {"src": "*fp32", "buf": "*fp32", "sig": "*i32", "peer": "i32"}, {"BLOCK": 64}))
    out.append(("tests/npu_compile_kernels.py::dot_fp16", K.dot_fp16, {"a": "*fp16", "b": "*fp16", "c": "*fp16"},
                {"M": 16, "N": 16, "K": 16}))
    return out


TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64",
                "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "i1": "bool"}


def _cpu_seconds():
    """CPU time of this process and of its finished children (the adapter and the compiler)."""
    import resource
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _launch_args(sig):
    """Arguments that Triton specializes to `sig` (a tensor per pointer, an int per integer)."""
    import torch
    args = {}
    for name, ty in sig.items():
        if ty.startswith("*"):
            args[name] = torch.empty(1, dtype=getattr(torch, TORCH_DTYPES[ty[1:]]))
        elif ty in ("i32", "i64"):
            args[name] = 2 ** 40 if ty == "i64" else 3
        else:
            raise ValueError(f"no launch argument for {name}: {ty}")
    return args


def _repeated_launch_seconds(fn, sig, consts, cache_dir, rounds=200):
    """What the launch check costs a launch once its kernel's verdict is known in this process."""
    from triton_dist.backend_ascend import compile_check
    from triton_dist.kernel_launches import Launch
    launch = Launch(getattr(fn, "fn", fn), {**_launch_args(sig), **consts}, tuple(consts))
    got, _ = compile_check.signature_of(launch)
    assert got == sig, f"the launch arguments specialize to {got}, not {sig}"
    saved = {k: os.environ.pop(k, None) for k in (compile_check.SOURCES_ENV, compile_check.LOG_ENV)}
    os.environ["TRITON_DIST_NPU_COMPILE_CACHE"] = cache_dir
    compile_check._verdicts.clear()
    try:
        try:
            compile_check.check_launch(launch)          # the first launch: the verdict from the disk cache
        except compile_check.NpuCompileError:
            pass
        t0 = time.perf_counter()
        for _ in range(rounds):
            try:
                compile_check.check_launch(launch)
            except compile_check.NpuCompileError:       # a refused kernel raises at every launch
                pass
        return (time.perf_counter() - t0) / rounds
    finally:
        os.environ.pop("TRITON_DIST_NPU_COMPILE_CACHE", None)
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import triton_dist  # noqa: F401 - the simulator's kernels, as the suite defines them
    from triton_dist.backend_ascend import cache, known_limits, pipeline, toolchain
    tools = toolchain.find()
    if tools.missing:
        print("tools missing: " + "; ".join(tools.missing))
        return 2
    print(f"load before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print(f"triton-adapter-opt: {tools.adapter_from}; bishengir-compile: {tools.compiler_from}")
    head = (f"{'kernel':58} {'verdict':9} {'frontend':>8} {'adapter':>8} {'bisheng':>8} {'cold min':>8} "
            f"{'cold med':>8} {'cpu med':>8} {'disk':>8} {'memo':>8}")
    print(head)
    print("-" * len(head))
    totals = {"cold": 0.0, "cpu": 0.0, "disk": 0.0, "memo": 0.0}
    kernels = _kernels()
    for key, fn, sig, consts in kernels:
        colds, stages, cpus = [], [], []
        tmp_cache = tempfile.mkdtemp(prefix="bench-npu-compile-")
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                pipeline._jit_keys.clear()          # a new process: Triton's key of the kernel not known yet
                c0, t0 = _cpu_seconds(), time.perf_counter()
                out = pipeline.compile_kernel(fn, sig, consts, cache=cache.Cache(tmp), tools=tools)
                colds.append(time.perf_counter() - t0)
                cpus.append(_cpu_seconds() - c0)
                stages.append(out.seconds)
                pipeline._jit_keys.clear()
                t0 = time.perf_counter()
                hit = pipeline.compile_kernel(fn, sig, consts, cache=cache.Cache(tmp), tools=tools)
                disk = time.perf_counter() - t0
                assert hit.cached and hit.status == out.status
                if i == 0:                 # the launch check below reads this verdict from disk
                    shutil.copytree(tmp, tmp_cache, dirs_exist_ok=True)
        memo = _repeated_launch_seconds(fn, sig, consts, tmp_cache)
        med = {k: statistics.median(s[k] for s in stages) for k in stages[0]}
        name = key if len(key) <= 58 else "..." + key[-55:]
        shutil.rmtree(tmp_cache, ignore_errors=True)
        verdict = "limit" if out.status == "refused" and known_limits.match(key, out.errors) else out.status
        print(f"{name:58} {verdict:9} {med['frontend']:8.2f} {med['ttadapter']:8.2f} "
              f"{med.get('bishengir-compile', 0):8.2f} {min(colds):8.2f} {statistics.median(colds):8.2f} "
              f"{statistics.median(cpus):8.2f} {disk:8.3f} {memo * 1e6:6.1f}us")
        totals["cold"] += statistics.median(colds)
        totals["cpu"] += statistics.median(cpus)
        totals["disk"] += disk
        totals["memo"] += memo
    print("-" * len(head))
    print(f"{'total (median cold, one disk read, one memo hit each)':58} {'':9} {'':8} {'':8} {'':8} {'':8} "
          f"{totals['cold']:8.2f} {totals['cpu']:8.2f} {totals['disk']:8.3f} {totals['memo'] * 1e6:6.1f}us")
    print(f"cache effect: a new session reads {totals['cold'] / max(totals['disk'], 1e-9):.0f}x faster than it "
          f"compiles; a repeated launch costs {totals['memo'] * 1e6 / len(kernels):.1f} us")
    print(f"load after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
