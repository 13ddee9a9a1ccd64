"""Measure the numbers of the `h200-nvlink` device profile (sim/predict/profiles/h200-nvlink.json).

    TRITON_DIST_BACKEND=cuda python benchmarks/measure_h200.py [--out FILE.json]
    python benchmarks/measure_h200.py --small        # on the simulator: tiny sizes, checks the script runs

Two ranks, one per GPU.  Every figure is a CUDA-event time around `iters` back-to-back
calls after warm-up (wall clock for the host costs); nothing is asserted.
- hbm_copy: torch copy_ of 1 GiB on one GPU, and a Triton copy kernel on every SM and on one SM;
- nvlink: a Triton kernel storing into the peer's symmetric memory (dl.symm_at + tl.store), on
  every SM and on one SM, one direction (rank 0 pushes) and both directions at once; and
  shm.putmem from every SM;
- matmul: torch.matmul (cuBLAS) bf16 at the benchmark's shapes;
- signal ping-pong: one program per rank, dl.notify SET / dl.wait, ROUNDS round trips;
- launch: an empty Triton kernel, back to back (host wall time and GPU time per launch), and
  the host time of one small kernel-library call (all_gather, all_reduce one_shot / ring).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton                       # noqa: E402
import triton.language as tl        # noqa: E402

import triton_dist.language as dl   # noqa: E402
from triton_dist.language.extra import libshmem_device as shm   # noqa: E402


@triton.jit
def copy_kernel(src, dst, n, CHUNK, BLOCK: tl.constexpr):
    start = tl.program_id(0) * CHUNK
    end = tl.minimum(start + CHUNK, n)
    offs = tl.arange(0, BLOCK)
    for off in range(start, end, BLOCK):
        m = off + offs < end
        tl.store(dst + off + offs, tl.load(src + off + offs, mask=m), mask=m)


@triton.jit
def push_kernel(src, dst, n, CHUNK, BLOCK: tl.constexpr):
    rdst = dl.symm_at(dst, (dl.rank() + 1) % dl.num_ranks())
    start = tl.program_id(0) * CHUNK
    end = tl.minimum(start + CHUNK, n)
    offs = tl.arange(0, BLOCK)
    for off in range(start, end, BLOCK):
        m = off + offs < end
        tl.store(rdst + off + offs, tl.load(src + off + offs, mask=m), mask=m)


@triton.jit
def putmem_kernel(src, dst, n, CHUNK, ES: tl.constexpr):
    peer = (dl.rank() + 1) % dl.num_ranks()
    start = tl.program_id(0) * CHUNK
    cnt = tl.minimum(CHUNK, n - start)
    shm.putmem(dst + start, src + start, cnt * ES, peer)


@triton.jit
def ping_pong_kernel(ping, pong, ROUNDS: tl.constexpr):
    me = dl.rank()
    for i in range(1, ROUNDS + 1):
        if me == 0:
            dl.notify(ping, 1, signal=i, sig_op="set")
            dl.wait(pong, 1, "sys", "acquire", waitValue=i)
        else:
            dl.wait(ping, 1, "sys", "acquire", waitValue=i)
            dl.notify(pong, 0, signal=i, sig_op="set")


@triton.jit
def empty_kernel(x):
    pass


def _rank(small):
    import torch

    import triton_dist
    from triton_dist import kernels
    r, n = triton_dist.rank(), triton_dist.world_size()
    dev = triton_dist.device()
    cuda = dev.type == "cuda"
    sms = torch.cuda.get_device_properties(dev).multi_processor_count if cuda else 4
    out = {"rank": r, "world_size": n, "sms": sms}
    if cuda:
        out["gpu"] = torch.cuda.get_device_name(dev)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def timed(fn, iters, warmup=2, both=True):
        """Seconds per call: CUDA events (GPU time of back-to-back calls) after a barrier."""
        for _ in range(warmup):
            fn()
        sync()
        triton_dist.barrier()
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(iters):
                fn()
            e.record()
            torch.cuda.synchronize()
            t = s.elapsed_time(e) / 1e3 / iters
        else:
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            t = (time.perf_counter() - t0) / iters
        triton_dist.barrier()
        return t

    def host_time(fn, iters):
        for _ in range(10):
            fn()
        sync()
        triton_dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        t = (time.perf_counter() - t0) / iters
        sync()
        triton_dist.barrier()
        return t

    def show(key, val):
        out[key] = val
        if r == 0:
            print("[measure_h200]", key, json.dumps(val), flush=True)

    it = 3 if small else 20
    # ---- HBM copy
    nb = (1 << 16) if small else (1 << 30)
    x = torch.empty(nb // 4, device=dev)
    y = torch.empty(nb // 4, device=dev)
    x.normal_()
    t = timed(lambda: y.copy_(x), it)
    show("hbm_copy_torch", dict(bytes=nb, s=t, GBps=nb / t / 1e9))
    ne = nb // 4
    BLOCK = 4096 if not small else 256
    for progs in (sms, 1):
        chunk = -(-ne // progs)
        chunk = -(-chunk // BLOCK) * BLOCK
        nbytes = ne * 4 if progs == sms else min(ne, chunk) * 4
        t = timed(lambda: copy_kernel[(progs,)](x, y, ne if progs == sms else min(ne, chunk), chunk, BLOCK=BLOCK),
                  it if progs == sms else 3)
        show(f"hbm_copy_triton_{'all' if progs == sms else 'one'}_sm", dict(programs=progs, bytes=nbytes, s=t,
                                                                            GBps=nbytes / t / 1e9))
    del x, y
    # ---- NVLink: remote stores and putmem into the peer's symmetric memory
    nb = (1 << 16) if small else (256 << 20)
    ne = nb // 4
    src = triton_dist.symm_tensor((ne,), torch.float32)
    dst = triton_dist.symm_tensor((ne,), torch.float32)
    src.fill_(1.0)
    triton_dist.barrier()
    for progs in (sms, 1):
        chunk = -(-ne // progs)
        chunk = -(-chunk // BLOCK) * BLOCK
        cnt = ne if progs == sms else min(ne, chunk, (16 << 20) // 4 if not small else ne)
        for direction in ("one", "both"):
            active = direction == "both" or r == 0

            def go():
                if active:
                    push_kernel[(progs,)](src, dst, cnt, chunk, BLOCK=BLOCK)
            t = timed(go, it if progs == sms else 3)
            show(f"nvlink_store_{'all' if progs == sms else 'one'}_sm_{direction}",
                 dict(programs=progs, bytes=cnt * 4, s=t, GBps=cnt * 4 / t / 1e9))
    chunk = -(-ne // sms)
    t = timed(lambda: putmem_kernel[(sms,)](src, dst, ne, chunk, ES=4), it)
    show("nvlink_putmem_all_sm_both", dict(programs=sms, bytes=nb, s=t, GBps=nb / t / 1e9))
    t = timed(lambda: putmem_kernel[(1,)](src, dst, min(ne, (16 << 20) // 4), ne, ES=4), 3)
    show("nvlink_putmem_one_sm_both", dict(programs=1, bytes=min(nb, 16 << 20), s=t,
                                           GBps=min(nb, 16 << 20) / t / 1e9))
    triton_dist.free(dst)
    triton_dist.free(src)
    # ---- matmul (cuBLAS)
    if cuda:
        for (M, N, K) in ((8192, 8192, 4096), (8192, 8192, 8192), (8192, 28672, 8192)):
            a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
            b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
            t = timed(lambda: torch.matmul(a, b), 10)
            show(f"matmul_bf16_{M}x{N}x{K}", dict(s=t, TFLOPs=2 * M * N * K / t / 1e12))
            del a, b
        torch.cuda.empty_cache()
    # ---- signal ping-pong
    ping = triton_dist.symm_tensor((16,), torch.int32)
    pong = triton_dist.symm_tensor((16,), torch.int32)
    rounds = 8 if small else 2000
    triton_dist.barrier()
    ping_pong_kernel[(1,)](ping, pong, ROUNDS=rounds)       # compile + warm
    sync()
    ping.zero_()
    pong.zero_()
    sync()
    t = timed(lambda: ping_pong_kernel[(1,)](ping, pong, ROUNDS=rounds), 1, warmup=0)
    show("signal_ping_pong", dict(rounds=rounds, s=t, round_trip_s=t / rounds))
    # ---- launch costs
    e = torch.zeros(16, device=dev)
    t = timed(lambda: empty_kernel[(1,)](e), 10 if small else 500)
    show("empty_kernel_gpu_per_launch", dict(s=t))
    t = host_time(lambda: empty_kernel[(1,)](e), 10 if small else 500)
    show("empty_kernel_host_per_launch", dict(s=t))
    x = torch.randn(256, device=dev)
    for name, f in (("all_gather", lambda: kernels.all_gather(x)),
                    ("all_reduce_one_shot", lambda: kernels.all_reduce(x, method="one_shot")),
                    ("all_reduce_ring", lambda: kernels.all_reduce(x, method="ring"))):
        th = host_time(f, 10 if small else 200)
        tg = timed(f, 10 if small else 200)
        show(f"library_call_{name}_1KiB", dict(host_s=th, events_s=tg))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", action="store_true", help="tiny sizes (runs on the simulator)")
    p.add_argument("--out", default=None, help="write the figures (JSON) here")
    args = p.parse_args(argv)
    os.environ.setdefault("TRITON_DIST_HEAP_SIZE", str((2 << 30) if not args.small else (64 << 20)))
    import triton_dist
    t0 = time.time()
    res = triton_dist.launch(_rank, args.small, world_size=2, timeout=580).values[0]
    res["date"] = time.strftime("%Y-%m-%d")
    res["seconds"] = round(time.time() - t0, 1)
    text = json.dumps(res, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
