"""triton-ascend's extension ops (triton.language.extra.cann.extension) through the real NPU compilers.

Each op reaches triton-ascend 3.2.0's triton-adapter-opt in the form triton-ascend's frontend gives it
(backend_ascend/extension_ops.py, FORMS, with the sources) and then AscendNPU-IR's bishengir-compile.
Oracle: the compilers' own verdicts.  For every op a kernel written in the style of triton-ascend's
pytest_ut tests (test_extract_slice.py, test_insert_slice.py, test_sort.py, test_flip.py,
test_index_select.py, test_sync_block*.py) or of its mem_ops docstring examples is compiled at a
small tile (accepted, or "cannot lower" with the adapter's own message for the ops the 3.2.0 adapter
does not take), and at a tile too large for the 192 KiB unified buffer, which bishengir-compile
refuses with its `ub overflow` line (reported as refused, never as "cannot lower").
The verdicts are cached (backend_ascend/cache.py): a second run costs the trace only.
"""
import os

import pytest
import triton
import triton.language as tl

import triton_dist  # noqa: F401  (the simulator's backend installs the extension module where none is)
import triton.language.extra.cann.extension as extension  # noqa: E402
from triton_dist.backend_ascend import cache, carry, extension_ops, pipeline, toolchain  # noqa: E402
from triton_dist.cli import main  # noqa: E402

TOOLS = toolchain.find()
needs_tools = pytest.mark.skipif(bool(TOOLS.missing), reason="; ".join(TOOLS.missing))
THIS = os.path.abspath(__file__)
UB = "error: ub overflow, requires "


# --- kernels, in the style of triton-ascend's pytest_ut tests ------------------------------------------------
@triton.jit
def add_then_extract(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, SUB: tl.constexpr):
    # test_extract_slice.py's shape of kernel: an add over the block, then its first SUB elements
    start = tl.program_id(0) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    total = tl.load(x_ptr + offs, mask=offs < n) + tl.load(y_ptr + offs, mask=offs < n)
    head = extension.extract_slice(total, [start], [SUB], [1])
    out = start + tl.arange(0, SUB)
    tl.store(out_ptr + out, head, mask=out < n)


@triton.jit
def rows_into_tile(x_ptr, out_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    # a tile assembled row by row (test_index_select.py's manual gather builds its buffer this way)
    tile = tl.zeros((ROWS, COLS), tl.float32)
    cols = tl.arange(0, COLS)
    for r in range(ROWS):
        row = tl.load(x_ptr + r * COLS + cols) * 2.0
        tile = extension.insert_slice(tile, row[None, :], offsets=(r, 0), sizes=(1, COLS), strides=(1, 1))
    tl.store(out_ptr + tl.arange(0, ROWS)[:, None] * COLS + cols[None, :], tile)


@triton.jit
def rows_by_index(in_ptr, idx_ptr, out_ptr, n_idx, STRIDE: tl.constexpr, GB: tl.constexpr, SUB: tl.constexpr,
                  OB: tl.constexpr):
    # test_index_select.py's manual gather: each index read as a scalar (get_element, at a loop
    # variable), its row loaded and put into a buffer tile (insert_slice), the tile stored
    g0 = tl.program_id(0) * GB
    for go in range(0, GB, SUB):
        gi = tl.arange(0, SUB) + g0 + go
        gm = gi < n_idx
        idx = tl.load(idx_ptr + gi, gm, other=0)
        for oo in range(0, STRIDE, OB):
            buf = tl.zeros((SUB, OB), tl.float32)
            oi = tl.arange(0, OB) + oo
            om = oi < STRIDE
            for i in range(0, SUB):
                row = tl.load(in_ptr + extension.get_element(idx, (i,)) * STRIDE + oi, om)
                buf = extension.insert_slice(buf, row[None, :], offsets=(i, 0), sizes=(1, OB), strides=(1, 1))
            tl.store(out_ptr + gi[:, None] * STRIDE + oi[None, :], buf, gm[:, None] & om[None, :])


@triton.jit
def sort_rows(x_ptr, out_ptr, ROWS: tl.constexpr, COLS: tl.constexpr, DESCENDING: tl.constexpr):
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + offs, extension.sort(tl.load(x_ptr + offs), -1, DESCENDING))


@triton.jit
def flip_rows(x_ptr, out_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + offs, extension.flip(tl.load(x_ptr + offs), 1))


@triton.jit
def select_rows(src_ptr, idx_ptr, out_ptr, N_IDX: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr):
    # index_select_simd along dim 0 of a (ROWS, COLS) source, whole rows read
    idx = tl.load(idx_ptr + tl.arange(0, N_IDX))
    picked = extension.index_select_simd(src_ptr, 0, idx, [ROWS, COLS], [0, 0], [-1, COLS])
    tl.store(out_ptr + tl.arange(0, N_IDX)[:, None] * COLS + tl.arange(0, COLS)[None, :], picked)


@triton.jit
def dot_then_vector(a_ptr, b_ptr, c_ptr, buf_ptr, K: tl.constexpr, BLOCK: tl.constexpr):
    # test_sync_block.py's shape: the cube writes a dot to a buffer, flags the vector core, which
    # waits and reads it back; BLOCK sizes a vector-side tile
    k = tl.arange(0, K)
    acc = tl.dot(tl.load(a_ptr + k[None, :]), tl.load(b_ptr + k[:, None]))
    tl.store(buf_ptr + tl.arange(0, 1)[:, None] + tl.arange(0, 1)[None, :], acc)
    extension.sync_block_set("cube", "vector", 5)
    extension.sync_block_wait("cube", "vector", 5)
    offs = tl.arange(0, BLOCK)
    v = tl.load(c_ptr + offs) + tl.load(buf_ptr)
    tl.store(c_ptr + offs, tl.exp(v))


@triton.jit
def flag_with_pipes(a_ptr, b_ptr, c_ptr, buf_ptr, event, K: tl.constexpr):
    # test_sync_block.py names the pipes (PIPE_MTE1 -> PIPE_MTE3); here the event id is a run-time value
    k = tl.arange(0, K)
    acc = tl.dot(tl.load(a_ptr + k[None, :]), tl.load(b_ptr + k[:, None]))
    tl.store(buf_ptr + tl.arange(0, 1)[:, None] + tl.arange(0, 1)[None, :], acc)
    extension.sync_block_set("cube", "vector", event, extension.PIPE.PIPE_MTE1, extension.PIPE.PIPE_MTE3)
    extension.sync_block_wait("cube", "vector", event, extension.PIPE.PIPE_MTE1, extension.PIPE.PIPE_MTE3)
    tl.store(c_ptr, tl.load(buf_ptr))


@triton.jit
def barrier_modes(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs)
    extension.sync_block_all("all_cube", 8)
    extension.sync_block_all("all_vector", 9)
    extension.sync_block_all("all", 10)
    tl.store(out_ptr + offs, v + 1.0)


@triton.jit
def barrier_sub_vector(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    extension.sync_block_all("all_sub_vector", 11)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def gather_rows(src_ptr, idx_ptr, out_ptr, N_IDX: tl.constexpr, COLS: tl.constexpr):
    # mem_ops' gather_out_to_ub: rows of a (16, COLS) source picked by an index tile, dim 0
    idx = tl.load(idx_ptr + tl.arange(0, N_IDX)[:, None] * COLS + tl.arange(0, COLS)[None, :])
    rows = extension.gather_out_to_ub(src_ptr, idx, 16, 0, (COLS, 1), (N_IDX, COLS), (0, 0))
    tl.store(out_ptr + tl.arange(0, N_IDX)[:, None] * COLS + tl.arange(0, COLS)[None, :], rows)


@triton.jit
def scatter_rows(dst_ptr, val_ptr, idx_ptr, N_IDX: tl.constexpr, COLS: tl.constexpr):
    offs = tl.arange(0, N_IDX)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    extension.scatter_ub_to_out(dst_ptr, tl.load(val_ptr + offs), tl.load(idx_ptr + offs), 16, 0, (COLS, 1),
                                (N_IDX, COLS), (0, 0))


@triton.jit
def put_rows(dst_ptr, val_ptr, idx_ptr, N_IDX: tl.constexpr, COLS: tl.constexpr):
    idx = tl.load(idx_ptr + tl.arange(0, N_IDX))
    val = tl.load(val_ptr + tl.arange(0, N_IDX)[:, None] * COLS + tl.arange(0, COLS)[None, :])
    extension.index_put(dst_ptr, idx, val, 0, 16, (N_IDX, COLS), (0, 0), (COLS, 1))


@triton.jit
def saturating_cast(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).cast(tl.int8, overflow_mode="saturate"))


F32 = "*fp32"
# (kernel, signature, constexprs of an accepted launch, constexprs of one whose tiles overflow UB)
ACCEPTED = {
    "extract_slice": (add_then_extract, {"x_ptr": F32, "y_ptr": F32, "out_ptr": F32, "n": "i32"},
                      {"BLOCK": 1024, "SUB": 32}, {"BLOCK": 65536, "SUB": 32}),
    "insert_slice": (rows_into_tile, {"x_ptr": F32, "out_ptr": F32}, {"ROWS": 4, "COLS": 64},
                     {"ROWS": 4, "COLS": 32768}),
    "get_element": (rows_by_index, {"in_ptr": F32, "idx_ptr": "*i32", "out_ptr": F32, "n_idx": "i32"},
                    {"STRIDE": 128, "GB": 16, "SUB": 4, "OB": 64}, {"STRIDE": 65536, "GB": 64, "SUB": 64, "OB": 4096}),
    "sort": (sort_rows, {"x_ptr": F32, "out_ptr": F32}, {"ROWS": 4, "COLS": 32, "DESCENDING": True},
             {"ROWS": 64, "COLS": 1024, "DESCENDING": True}),
    "flip": (flip_rows, {"x_ptr": F32, "out_ptr": F32}, {"ROWS": 4, "COLS": 32}, {"ROWS": 64, "COLS": 1024}),
    "index_select_simd": (select_rows, {"src_ptr": F32, "idx_ptr": "*i32", "out_ptr": F32},
                          {"N_IDX": 4, "ROWS": 16, "COLS": 64}, {"N_IDX": 64, "ROWS": 1024, "COLS": 1024}),
    "sync_block_set/wait": (dot_then_vector, {"a_ptr": F32, "b_ptr": F32, "c_ptr": F32, "buf_ptr": F32},
                            {"K": 16, "BLOCK": 64}, {"K": 16, "BLOCK": 65536}),
    "sync_block_all": (barrier_modes, {"x_ptr": F32, "out_ptr": F32}, {"BLOCK": 1024}, {"BLOCK": 65536}),
    "annotation_mark": (saturating_cast, {"x_ptr": F32, "out_ptr": "*i8"}, {"BLOCK": 1024}, {"BLOCK": 65536}),
}
# the ops triton-adapter-opt 3.2.0 does not take, and its own message for each (docs/ascend.md)
CANNOT_LOWER = {
    "gather_out_to_ub": (gather_rows, {"src_ptr": F32, "idx_ptr": "*i32", "out_ptr": F32}, {"N_IDX": 4, "COLS": 8},
                         "Dialect `ascend' not found for custom op 'ascend.gather_out_to_ub'"),
    "scatter_ub_to_out": (scatter_rows, {"dst_ptr": F32, "val_ptr": F32, "idx_ptr": "*i32"}, {"N_IDX": 4, "COLS": 8},
                          "Dialect `ascend' not found for custom op 'ascend.scatter_ub_to_out'"),
    "index_put": (put_rows, {"dst_ptr": F32, "val_ptr": F32, "idx_ptr": "*i32"}, {"N_IDX": 4, "COLS": 8},
                  "Dialect `ascend' not found for custom op 'ascend.index_put'"),
    'sync_block_all("all_sub_vector")': (barrier_sub_vector, {"x_ptr": F32, "out_ptr": F32}, {"BLOCK": 64},
                                         "Unknown custom operation: sync_block_all"),
}


def _compile(kernel, sig, consts, **kw):
    return pipeline.compile_kernel(kernel, sig, consts, cache=cache.Cache(), tools=TOOLS, **kw)


def test_every_extension_op_is_covered():
    ops = {k.split("(")[0] for k in CANNOT_LOWER} | set(ACCEPTED)
    ops = {o for k in ops for o in ([f"sync_block_{s}" for s in ("set", "wait")] if k == "sync_block_set/wait"
                                    else [k])}
    assert ops == set(extension_ops.FORMS)
    assert {k for k, f in extension_ops.FORMS.items() if not f.in_320} == {
        k.split("(")[0] for k in CANNOT_LOWER} - {"sync_block_all"}


@needs_tools
@pytest.mark.parametrize("op", sorted(ACCEPTED))
def test_the_op_compiles_and_a_tile_too_large_is_refused(op):
    kernel, sig, small, large = ACCEPTED[op]
    out = _compile(kernel, sig, small)
    assert out.accepted, out.report()
    assert "the whole BiShengHIR pipeline" in out.stage
    big = _compile(kernel, sig, large)
    assert not big.accepted and big.failed_at == "bishengir-compile", big
    assert any(UB in e for e in big.errors), big.errors       # the compiler's own line, as a refusal


@needs_tools
def test_an_int32_sort_is_refused_by_bishengirs_vsort():
    """triton-ascend's sort takes int32 (extension/vec_ops.py's type list); the 3.2.0 adapter turns tt.sort into
    hivm.hir.vsort, whose verifier in bishengir-compile 1.2.0 takes f16/f32 only: the compiler's own refusal
    (int8/int16 and bf16 compile)."""
    out = _compile(sort_rows, {"x_ptr": "*i32", "out_ptr": "*i32"}, {"ROWS": 4, "COLS": 32, "DESCENDING": False})
    assert not out.accepted and out.failed_at == "bishengir-compile", out
    assert any("'hivm.hir.vsort' op failed to verify that operand at idx 0 and 1 should have element type 16-bit "
               "float or 32-bit float" in e for e in out.errors), out.errors
    assert _compile(sort_rows, {"x_ptr": "*bf16", "out_ptr": "*bf16"},
                    {"ROWS": 4, "COLS": 32, "DESCENDING": False}).accepted


@needs_tools
@pytest.mark.parametrize("op", sorted(CANNOT_LOWER))
def test_what_the_320_adapter_does_not_take_cannot_be_lowered_with_its_message(op):
    kernel, sig, consts, message = CANNOT_LOWER[op]
    with pytest.raises(extension_ops.CannotLower) as e:
        _compile(kernel, sig, consts)
    text = str(e.value)
    assert message in text and f"cannot lower kernel {kernel.__name__}" in text
    assert "not the compiler's verdict" in text


@needs_tools
def test_npu_compile_exits_2_on_an_op_it_cannot_lower(capsys):
    with pytest.raises(SystemExit) as e:
        main(["npu-compile", f"{THIS}::gather_rows", "-s", "src_ptr=*fp32,idx_ptr=*i32,out_ptr=*fp32",
              "-c", "N_IDX=4,COLS=8"])
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert "cannot lower kernel gather_rows" in err and "ascend.gather_out_to_ub" in err


@needs_tools
def test_the_adapter_gets_the_ops_in_triton_ascends_form(tmp_path):
    """The adapter's input holds the ops triton-ascend's builders make (not the markers)."""
    out = _compile(sort_rows, {"x_ptr": F32, "out_ptr": F32}, {"ROWS": 4, "COLS": 32, "DESCENDING": True},
                   keep=str(tmp_path / "sort"))
    assert out.accepted, out.report()
    text = (tmp_path / "sort" / "kernel.carried.ttir.mlir").read_text()
    assert "tt.sort %" in text and ", 1, true : tensor<4x32xf32> -> tensor<4x32xf32>" in text
    assert "triton_dist.ascend_ext" not in text
    out = _compile(dot_then_vector, ACCEPTED["sync_block_set/wait"][1], {"K": 16, "BLOCK": 64},
                   keep=str(tmp_path / "sync"))
    text = (tmp_path / "sync" / "kernel.carried.ttir.mlir").read_text()
    # the main line's defaults for a cube -> vector flag: set on the cube (PIPE_FIX), wait on the vector
    assert "hivm.hir.sync_block_set[<CUBE>, <PIPE_FIX>, <PIPE_MTE2>] flag = %" in text
    assert "hivm.hir.sync_block_wait[<VECTOR>, <PIPE_FIX>, <PIPE_MTE2>] flag = %" in text


def test_markers_never_reach_the_adapter_unrewritten():
    """carry.carry_ttir rewrites every extension-op marker group (no tools needed)."""
    from triton_dist.backend_ascend.frontend import build_ttir
    module, _ = build_ttir(rows_into_tile, {"x_ptr": F32, "out_ptr": F32}, {"ROWS": 4, "COLS": 64})
    text = module.str_nodebug()
    assert "triton_dist.ascend_ext" in text
    carried, _ = carry.carry_ttir(text, False)
    assert "triton_dist.ascend_ext" not in carried
    assert "tensor.insert_slice" in carried and "into tensor<4x64xf32>" in carried


def test_docs_list_every_case_that_cannot_be_lowered_with_its_message():
    with open(os.path.join(os.path.dirname(os.path.dirname(THIS)), "docs", "ascend.md")) as f:
        docs = f.read()
    section = docs[docs.index("### What cannot be lowered"):]
    for op, (*_, message) in CANNOT_LOWER.items():
        assert f"| `{op}` |" in section and message in section, op


@needs_tools
def test_the_launch_check_skips_what_cannot_be_lowered_saying_so(monkeypatch):
    """Under --npu-compile a kernel with an op the 3.2.0 adapter does not take is skipped with the reason,
    not passed off as a frontend refusal nor as the compiler's verdict."""
    from triton_dist.backend_ascend import compile_check
    monkeypatch.delenv(compile_check.LOG_ENV, raising=False)
    kernel, sig, consts, message = CANNOT_LOWER["index_put"]
    status, reason = compile_check.check(kernel, sig, consts)
    assert status == "skipped", reason
    assert reason.startswith("cannot lower kernel put_rows") and message in reason


@needs_tools
def test_a_kernels_pipes_and_run_time_event_id_reach_the_op(tmp_path):
    sig = {"a_ptr": F32, "b_ptr": F32, "c_ptr": F32, "buf_ptr": F32, "event": "i32"}
    out = _compile(flag_with_pipes, sig, {"K": 16}, keep=str(tmp_path))
    assert out.accepted, out.report()
    text = (tmp_path / "kernel.carried.ttir.mlir").read_text()
    assert "hivm.hir.sync_block_set[<CUBE>, <PIPE_MTE1>, <PIPE_MTE3>] flag = %" in text
    assert "hivm.hir.sync_block_wait[<VECTOR>, <PIPE_MTE1>, <PIPE_MTE3>] flag = %" in text
    assert "arith.extsi %arg4 : i32 to i64" in text              # the event id argument, widened as the main line does


def test_a_compile_for_the_cuda_device_library_refuses_them_by_name():
    from triton_dist.backend_ascend.frontend import build_ttir
    from triton_dist.backend_cuda import devlib
    from triton_dist.errors import TritonDistError
    with pytest.raises(TritonDistError, match=r"extension\.sort is triton-ascend's \(an Ascend NPU op\): a kernel "
                                              r"compiled with device library 'triton_dist_cuda' cannot use it"):
        build_ttir(sort_rows, {"x_ptr": F32, "out_ptr": F32}, {"ROWS": 4, "COLS": 32, "DESCENDING": True},
                   extern_libs={devlib.LIBNAME: "/unused.bc"})


def test_a_compile_for_the_cuda_device_library_drops_the_cross_core_flags_only():
    """sync_block_set/wait order the cube and the vector half of one NPU block; a GPU program has
    one program order, so a kernel that orders its halves for the NPU (the library's gemm_rs,
    ag_gemm) compiles for CUDA with no trace of them (it was refused by name: the sm90 compile of
    the kernel library failed in a process whose simulator provides triton-ascend's extension).
    Oracle: the TTIR stock Triton makes has no marker of the op, and still the dot; sync_block_all,
    a barrier across blocks, stays refused."""
    from triton_dist.backend_ascend.frontend import build_ttir
    from triton_dist.backend_cuda import devlib
    from triton_dist.errors import TritonDistError
    from triton_dist.language._ext_emit import EXT_LIBNAME
    module, _ = build_ttir(dot_then_vector, ACCEPTED["sync_block_set/wait"][1], {"K": 16, "BLOCK": 64},
                           extern_libs={devlib.LIBNAME: "/unused.bc"})
    text = str(module)
    assert "tt.dot" in text and EXT_LIBNAME not in text and "sync_block" not in text
    with pytest.raises(TritonDistError, match=r"extension\.sync_block_all is triton-ascend's"):
        build_ttir(barrier_modes, {"x_ptr": F32, "out_ptr": F32}, {"BLOCK": 1024},
                   extern_libs={devlib.LIBNAME: "/unused.bc"})
