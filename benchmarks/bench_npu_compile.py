"""The real NPU compile pipeline's cost per kernel, and what its cache saves.

    python benchmarks/bench_npu_compile.py [--repeat N]

For every kernel of the kernel library and the examples (their recorded launch signatures,
tests/data/kernel_signatures.json, one per kernel) and the kernels of tests/npu_compile_kernels.py,
in this one run on this machine:
  cold   a compile with an empty cache: frontend (TTIR), ttadapter (triton-adapter-opt),
         bishengir-compile (to hivmc), and the whole, min and median of N;
  disk   the verdict read back from the on-disk cache (a new session);
  memo   a repeated launch in the same process (the in-process memo of the launch check).
The load (`uptime`) is printed with the figures: the machine is shared.
"""
import argparse
import json
import os
import statistics
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import triton_dist  # noqa: F401 - the simulator's kernels, as the suite defines them
    from triton_dist.backend_ascend import cache, compile_check, pipeline, toolchain
    tools = toolchain.find()
    if tools.missing:
        print("tools missing: " + "; ".join(tools.missing))
        return 2
    print(f"load before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print(f"triton-adapter-opt: {tools.adapter_from}; bishengir-compile: {tools.compiler_from}")
    head = (f"{'kernel':58} {'verdict':9} {'frontend':>8} {'adapter':>8} {'bisheng':>8} {'cold min':>8} "
            f"{'cold med':>8} {'disk':>8} {'memo':>8}")
    print(head)
    print("-" * len(head))
    totals = {"cold": 0.0, "disk": 0.0, "memo": 0.0}
    for key, fn, sig, consts in _kernels():
        colds, stages = [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                out = pipeline.compile_kernel(fn, sig, consts, cache=cache.Cache(tmp), tools=tools)
                colds.append(time.perf_counter() - t0)
                stages.append(out.seconds)
                t0 = time.perf_counter()
                hit = pipeline.compile_kernel(fn, sig, consts, cache=cache.Cache(tmp), tools=tools)
                disk = time.perf_counter() - t0
                assert hit.cached and hit.status == out.status
        # the launch check's memo: what a repeated launch of the same kernel costs
        from triton_dist.kernel_launches import Launch
        compile_check._verdicts[(getattr(fn, "fn", fn), tuple(sorted(sig.items())),
                                 tuple(sorted((k, repr(v)) for k, v in consts.items())))] = (out.status, out)
        launch_args = {**{k: None for k in sig}, **consts}
        t0 = time.perf_counter()
        for _ in range(100):
            key_ = compile_check._memo_key(Launch(getattr(fn, "fn", fn), launch_args, tuple(consts)), sig, consts)
            compile_check._verdicts.get(key_)
        memo = (time.perf_counter() - t0) / 100
        med = {k: statistics.median(s[k] for s in stages) for k in stages[0]}
        name = key if len(key) <= 58 else "..." + key[-55:]
        print(f"{name:58} {out.status:9} {med['frontend']:8.2f} {med['ttadapter']:8.2f} "
              f"{med.get('bishengir-compile', 0):8.2f} {min(colds):8.2f} {statistics.median(colds):8.2f} "
              f"{disk:8.3f} {memo * 1e6:6.1f}us")
        totals["cold"] += statistics.median(colds)
        totals["disk"] += disk
        totals["memo"] += memo
    print("-" * len(head))
    print(f"{'total (median cold, one disk read, one memo hit each)':58} {'':9} {'':8} {'':8} {'':8} {'':8} "
          f"{totals['cold']:8.2f} {totals['disk']:8.3f} {totals['memo'] * 1e6:6.1f}us")
    print(f"cache effect: a new session reads {totals['cold'] / max(totals['disk'], 1e-9):.0f}x faster than it "
          f"compiles; a repeated launch costs {totals['memo'] * 1e6 / len(_kernels()):.1f} us")
    print(f"load after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
