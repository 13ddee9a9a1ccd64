"""Element-wise kernels: masked tails, masked_fill, an autotuned exp-add, a saturating cast, a loop written
with extension.parallel."""
import torch
import triton
import triton.language as tl
import triton.language.extra.cann.extension as extension

from . import Case, Compile, Differs, EXACT, FP32, FP32_MATH, SGL, TA, gen, randn


# style: triton-lang/triton-ascend third_party/ascend/tutorials/01-vector-add.py
@triton.jit
def axpy_tail_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements                  # the last block is a tail: 1000 = 3 * 256 + 232
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def _axpy_run(x, y):
    out = torch.full_like(x, -7.0)
    n = x.numel()
    axpy_tail_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, y, out, 0.5, n, BLOCK_SIZE=256)
    return out


# style: triton-lang/triton-ascend docs/en/migration_guide/migrate_from_gpu.md (masked_fill, sub-blocks)
@triton.jit
def masked_fill_kernel(inp, fill_mask_ptr, value, out, N, BLOCK_SIZE: tl.constexpr, BLOCK_SIZE_SUB: tl.constexpr):
    base = tl.program_id(0) * BLOCK_SIZE
    for sub in range(tl.cdiv(BLOCK_SIZE, BLOCK_SIZE_SUB)):      # sub-blocks keep the UB use small
        offs = base + sub * BLOCK_SIZE_SUB + tl.arange(0, BLOCK_SIZE_SUB)
        in_range = offs < N
        vals = tl.load(inp + offs, mask=in_range, other=0)
        fill = tl.load(fill_mask_ptr + offs, mask=in_range, other=0).to(tl.int1)
        filled = tl.where(fill, tl.full([BLOCK_SIZE_SUB], value, dtype=vals.dtype), vals)
        tl.store(out + offs, filled, mask=in_range)


def _masked_fill_inputs():
    x = randn(3000, 11)
    return dict(x=x, m=(torch.rand(3000, generator=gen(12)) < 0.3).to(torch.int32))


def _masked_fill_run(x, m):
    out = torch.zeros_like(x)
    masked_fill_kernel[(triton.cdiv(x.numel(), 1024),)](x, m, -1.5, out, x.numel(), 1024, 256)
    return out


# style: triton-lang/triton-ascend third_party/ascend/tutorials/06-demo-autotune.py
@triton.autotune(configs=[triton.Config({"XS": 1024}), triton.Config({"XS": 4096}), triton.Config({"XS": 65536})],
                 key=["numel"])
@triton.jit
def exp_add_kernel(out_ptr0, in_ptr0, in_ptr1, numel, XS: tl.constexpr):
    idx = tl.program_id(0) * XS + tl.arange(0, XS)
    msk = idx < numel
    for i in range(3):
        t0 = tl.load(in_ptr0 + idx, mask=msk, other=0.0)
        t1 = tl.load(in_ptr1 + idx, mask=msk, other=0.0)
        tl.store(out_ptr0 + idx, tl.math.exp(t0) + t1 + i, mask=msk)


def _exp_add_run(x0, x1):
    y = torch.empty_like(x0)
    n = x0.numel()
    exp_add_kernel[lambda meta: (triton.cdiv(n, meta["XS"]),)](y, x0, x1, n)
    return y


# style: triton-lang/triton-ascend third_party/ascend/tutorials/06-demo-autotune.py (without its mask: a user bug)
@triton.autotune(configs=[triton.Config({"XS": 1024}), triton.Config({"XS": 1536})], key=["numel"])
@triton.jit
def exp_unmasked_kernel(out_ptr, in_ptr, numel, XS: tl.constexpr):
    idx = tl.program_id(0) * XS + tl.arange(0, XS)          # no mask: right only when XS divides numel
    tl.store(out_ptr + idx, tl.math.exp(tl.load(in_ptr + idx)))


def _exp_unmasked_run(x):
    y = torch.empty_like(x)
    n = x.numel()
    exp_unmasked_kernel[lambda meta: (triton.cdiv(n, meta["XS"]),)](y, x, n)
    return y


# style: sgl-project/sgl-kernel-npu python/sgl_kernel_npu/sgl_kernel_npu/norm/add_rmsnorm_bias.py (int8 quant store)
@triton.jit
def quant_int8_kernel(x_ptr, scale_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0.0) * tl.load(scale_ptr)
    tl.store(out_ptr + offs, v.cast(tl.int8, overflow_mode="saturate"), mask=m)


def _quant_inputs():
    # integral values after scaling, so that only saturation (not the rounding mode) decides the result
    x = torch.randint(-300, 300, (200,), generator=gen(14)).to(torch.float32) / 2
    return dict(x=x, scale=torch.tensor([2.0]))


def _quant_run(x, scale):
    out = torch.zeros(x.numel(), dtype=torch.int8)
    quant_int8_kernel[(triton.cdiv(x.numel(), 64),)](x, scale, out, x.numel(), BLOCK=64)
    return out


# style: triton-lang/triton-ascend docs/zh/triton_api/Extension_Ops/parallel.md
@triton.jit
def parallel_strided_copy_kernel(input_ptr, out_ptr, n_elements: tl.constexpr, REPEATS: tl.constexpr):
    x = tl.arange(0, n_elements)
    src = input_ptr + x // 4
    for i in extension.parallel(0, REPEATS, 1, bind_sub_block=False):
        src += x // 4                                  # advanced REPEATS times in all
    tl.store(out_ptr + x, tl.load(src + x % 4))


def _par_run(x):
    out = torch.empty(32, dtype=x.dtype)
    parallel_strided_copy_kernel[(1,)](x, out, 32, 3)
    return out


def _par_ref(x):
    i = torch.arange(32)
    return x[(i // 4) * 4 + i % 4]


CASES = [
    Case("axpy_masked_tail", TA + "third_party/ascend/tutorials/01-vector-add.py",
         axpy_tail_kernel, lambda: dict(x=randn(1000, 1), y=randn(1000, 2)), _axpy_run,
         lambda x, y: 0.5 * x + y,
         [Compile({"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "alpha": "fp32", "n_elements": "i32"},
                  {"BLOCK_SIZE": 256})], **FP32),
    Case("masked_fill_sub_blocks", TA + "docs/en/migration_guide/migrate_from_gpu.md",
         masked_fill_kernel, _masked_fill_inputs, _masked_fill_run,
         lambda x, m: x.masked_fill(m.bool(), -1.5),
         [Compile({"inp": "*fp32", "fill_mask_ptr": "*i32", "value": "fp32", "out": "*fp32", "N": "i32"},
                  {"BLOCK_SIZE": 1024, "BLOCK_SIZE_SUB": 256})], **EXACT),
    Case("exp_add_autotuned", TA + "third_party/ascend/tutorials/06-demo-autotune.py",
         exp_add_kernel, lambda: dict(x0=randn(5000, 3), x1=randn(5000, 4)), _exp_add_run,
         lambda x0, x1: torch.exp(x0) + x1 + 2,
         [Compile({"out_ptr0": "*fp32", "in_ptr0": "*fp32", "in_ptr1": "*fp32", "numel": "i32"}, {"XS": 1024}),
          Compile({"out_ptr0": "*fp32", "in_ptr0": "*fp32", "in_ptr1": "*fp32", "numel": "i32"}, {"XS": 4096}),
          # 65536 fp32 per block: the config users meet first as a UB overflow
          Compile({"out_ptr0": "*fp32", "in_ptr0": "*fp32", "in_ptr1": "*fp32", "numel": "i32"}, {"XS": 65536},
                  expect="ub overflow")], **FP32_MATH),
    # the second config reads past the tensor (4096 is no multiple of 1536): the simulator names that config
    Case("exp_autotuned_config_without_mask", TA + "third_party/ascend/tutorials/06-demo-autotune.py",
         exp_unmasked_kernel, lambda: dict(x=randn(4096, 5)), _exp_unmasked_run, None,
         [Compile({"out_ptr": "*fp32", "in_ptr": "*fp32", "numel": "i32"}, {"XS": 1024}),
          Compile({"out_ptr": "*fp32", "in_ptr": "*fp32", "numel": "i32"}, {"XS": 1536})],
         sim_error=r"autotuned kernel exp_unmasked_kernel, configs\[1\] \(XS=1536\): .*load of float32 at offset "
                   r"16384 of tensor argument 'in_ptr' of exp_unmasked_kernel is out of bounds",
         # compiled, the same load reads past the buffer as the NPU's MTE fault
         on_backend={"hivm": Differs("reports the fault", r"configs\[1\] \(XS=1536\): .*The DDR address of the MTE "
                                     r"instruction is out of range.*reads argument 'in_ptr'",
                                     "the compiled load of the last block leaves in_ptr, as on the NPU")}),
    Case("quant_int8_saturate", SGL + "python/sgl_kernel_npu/sgl_kernel_npu/norm/add_rmsnorm_bias.py",
         quant_int8_kernel, _quant_inputs, _quant_run,
         lambda x, scale: (x * scale).clamp(-128, 127).to(torch.int8),
         [Compile({"x_ptr": "*fp32", "scale_ptr": "*fp32", "out_ptr": "*i8", "n": "i32"}, {"BLOCK": 64})], **EXACT),
    Case("parallel_loop_strided_copy", TA + "docs/zh/triton_api/Extension_Ops/parallel.md",
         parallel_strided_copy_kernel, lambda: dict(x=torch.arange(40, dtype=torch.int32)), _par_run, _par_ref,
         [Compile({"input_ptr": "*i32", "out_ptr": "*i32"}, {"n_elements": 32, "REPEATS": 3})], **EXACT),
]
