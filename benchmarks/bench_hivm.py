"""The compiled kernel on the CPU (backend hivm) against Triton's own interpreter and the
simulator, on the same three kernels, compile time apart, in one run.

    python benchmarks/bench_hivm.py [--repeat N] [--docs]

Kernels (defined below; sizes chosen so the interpreter finishes in seconds on the 2-core
machine): `block_loop` (one program per 4096-element chunk, an inner loop over 256-element
blocks: y = 2x + 1 summed per chunk), `softmax` (a row softmax, 256 rows of 1024), `gemm`
(256x256x256 fp32, 64x64x32 tiles, K loop).

Each mode launches every kernel once to warm up (Triton's trace, the npu-compile pipeline and
the hivm JIT cache: compile time is not measured), then `--repeat` more times; the minimum wall
clock of those is printed (the machine is shared: the minimum is the least disturbed figure),
with the result checked against torch so a fast wrong answer cannot count.

- interpreter: a child process with TRITON_INTERPRET=1 that never imports triton_dist (stock
  Triton's interpreter as Triton made it, as benchmarks/bench_access.py runs "plain").
- sim: triton_dist.launch(world_size=1, backend="sim").
- hivm: triton_dist.launch(world_size=1, backend="hivm") (skipped, saying why, without the
  compilers).

--docs rewrites the block between `<!-- bench_hivm:begin -->` and `<!-- bench_hivm:end -->` of
docs/ascend.md (and of README.md's "How fast", scale 1 only) with the table, the date, the
commit and the load average.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BEGIN, END = "<!-- bench_hivm:begin -->", "<!-- bench_hivm:end -->"
# the target (hivm at least 10x faster than the interpreter) is judged on all three
COMPUTE_HEAVY = ("block_loop", "softmax", "gemm")


@triton.jit
def block_loop(x_ptr, out_ptr, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, CHUNK, BLOCK):
        offs = pid * CHUNK + i + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs) * 2.0 + 1.0
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)


@triton.jit
def softmax(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=m)


@triton.jit
def gemm(a_ptr, b_ptr, c_ptr, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # K is a constexpr: stock Triton 3.6's interpreter cannot range() over a runtime scalar argument
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def _cases(scale: int = 1):
    """name -> (launch thunk, check thunk): the inputs are made once, outside the timing.
    scale multiplies the programs of each launch (chunks, rows, GEMM tiles per side), not their tiles."""
    g = torch.Generator().manual_seed(0)
    chunks, CHUNK, BLOCK = 16 * scale, 4096, 256
    x = torch.randn(chunks * CHUNK, generator=g)
    y = torch.zeros(chunks * BLOCK)
    rows, cols = 256 * scale, 1024
    s = torch.randn(rows, cols, generator=g)
    so = torch.zeros_like(s)
    M = N = 256 * scale
    K = 256
    a, b = torch.randn(M, K, generator=g), torch.randn(K, N, generator=g)
    c = torch.zeros(M, N)
    return {
        "block_loop": (lambda: block_loop[(chunks,)](x, y, CHUNK=CHUNK, BLOCK=BLOCK),
                       lambda: torch.allclose(y, (x * 2 + 1).view(chunks, CHUNK // BLOCK, BLOCK).sum(1).reshape(-1),
                                              rtol=1e-4, atol=1e-3)),
        "softmax": (lambda: softmax[(rows,)](s, so, cols, s.stride(0), BLOCK=cols),
                    lambda: torch.allclose(so, torch.softmax(s, -1), atol=1e-6)),
        "gemm": (lambda: gemm[(M // 64, N // 64)](a, b, c, N, K=K, BM=64, BN=64, BK=32),
                 lambda: torch.allclose(c, a @ b, rtol=1e-3, atol=1e-3)),
    }


def measure(repeat: int, scale: int = 1) -> dict:
    """name -> {"s": min wall seconds, "ok": agrees with torch}, in whatever mode this process runs."""
    out = {}
    for name, (run, check) in _cases(scale).items():
        run()                                   # warm: trace, compile, JIT
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
        out[name] = {"s": min(times), "ok": bool(check())}
    return out


def _interpreter(repeat: int, scale: int) -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1")
    env.pop("TRITON_DIST_BACKEND", None)
    p = subprocess.run([sys.executable, __file__, "--child", "--repeat", str(repeat), "--scale", str(scale)], env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def _in_backend(backend: str, repeat: int, scale: int) -> dict:
    import triton_dist
    return triton_dist.launch(measure, repeat, scale, world_size=1, backend=backend, timeout=1800).values[0]


def _hivm_missing() -> list:
    from triton_dist.backend_ascend.cpu_run.backend import HivmBackend
    return HivmBackend.missing()


def table(res: dict) -> str:
    modes = [m for m in ("interpreter", "sim", "hivm") if m in res]
    head = ("| kernel | " + " | ".join(f"{m} (s)" for m in modes)
            + " | interpreter / sim | interpreter / hivm |")
    lines = [head, "|" + " --- |" * (len(modes) + 3)]
    for name in ("block_loop", "softmax", "gemm"):
        cells = []
        for m in modes:
            r = res[m][name]
            cells.append(f"{r['s']:.3f}" + ("" if r["ok"] else " (WRONG)"))
        base = res["interpreter"][name]["s"]
        ratio = [f"{base / res[m][name]['s']:.1f}x" if m in res else "-" for m in ("sim", "hivm")]
        lines.append(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratio) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--scale", type=int, default=1, help="programs per launch times N (default 1)")
    ap.add_argument("--docs", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    o = ap.parse_args()
    if o.child:
        assert "triton_dist" not in sys.modules
        print(json.dumps(measure(o.repeat, o.scale)))
        return
    sys.path.insert(0, ROOT)
    load_before = os.getloadavg()
    res = {"interpreter": _interpreter(o.repeat, o.scale), "sim": _in_backend("sim", o.repeat, o.scale)}
    missing = _hivm_missing()
    if missing:
        print(f"backend hivm skipped: {'; '.join(missing)}", file=sys.stderr)
    else:
        res["hivm"] = _in_backend("hivm", o.repeat, o.scale)
    load_after = os.getloadavg()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    # above one runnable job the other jobs' share shows in the absolute times, not in the ratios
    busy = max(load_before[0], load_after[0]) > 1.0
    note = (f"Measured {when} at commit {commit} on a machine of {os.cpu_count()} cores, "
            f"load average {load_before[0]:.1f} before and {load_after[0]:.1f} after"
            f"{' (other jobs were running: the absolute times are the load' + chr(39) + 's, the ratios the figure to read)' if busy else ''}; "
            f"world size 1, scale {o.scale}, min of {o.repeat} launches after a warm one, compile time excluded.")
    text = table(res) + "\n\n" + note
    print(text)
    heavy = [n for n in COMPUTE_HEAVY if "hivm" in res]
    if heavy:
        met = all(res["interpreter"][n]["s"] / res["hivm"][n]["s"] >= 10 for n in heavy)
        verdict = f"Target (hivm at least 10x faster than the interpreter on {', '.join(heavy)}): {'met' if met else 'NOT met'}."
        print(verdict)
        text += "\n" + verdict
    if o.docs:
        _write_block(os.path.join(ROOT, "docs", "ascend.md"), text)
        if o.scale == 1:
            _write_block(os.path.join(ROOT, "README.md"), text)


def _write_block(path: str, text: str) -> None:
    doc = open(path).read()
    if BEGIN not in doc:
        raise SystemExit(f"{path} has no {BEGIN} ... {END} block: add one where the table belongs")
    pre, rest = doc.split(BEGIN, 1)
    post = rest.split(END, 1)[1]
    open(path, "w").write(pre + BEGIN + "\n" + text + "\n" + END + post)


if __name__ == "__main__":
    main()
