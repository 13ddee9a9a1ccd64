"""Kernels shared by the benchmarks; importable with or without triton_dist."""
import triton
import triton.language as tl


@triton.jit
def empty_kernel(x):
    pass


@triton.jit
def block_copy_kernel(src, dst, ITERS: tl.constexpr, B: tl.constexpr):
    # ITERS rounds of one 32x32 fp32 block load + store
    r = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
    for i in range(ITERS):
        tl.store(dst + r, tl.load(src + r) + 1.0)


@triton.jit
def block_copy_grid_kernel(src, dst, ITERS: tl.constexpr, B: tl.constexpr):
    # the same loop in each of several programs, each on its own BxB tile
    r = tl.program_id(0) * B * B + tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
    for i in range(ITERS):
        tl.store(dst + r, tl.load(src + r) + 1.0)


@triton.jit
def dot_kernel(a, b, c, ITERS: tl.constexpr, B: tl.constexpr):
    r = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
    acc = tl.zeros((B, B), tl.float32)
    for i in range(ITERS):
        acc += tl.dot(tl.load(a + r), tl.load(b + r))
    tl.store(c + r, acc)


@triton.jit
def scalar_flag_kernel(flag, ITERS: tl.constexpr):
    # ITERS rounds of one scalar store and one scalar load (through the data cache model)
    for i in range(ITERS):
        tl.store(flag, i)
        tl.load(flag)
