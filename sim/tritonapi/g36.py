"""Stock triton 3.6 and 3.7: the generation the simulator was written against; the other
adapters say only how they differ from this one.

What sim/interp.py asks of an adapter, and how 3.6/3.7 answer (triton/runtime/interpreter.py
of the 3.6.0 wheel: _LangPatchScope :837, _patch_lang_tensor(tensor, scope) :872,
_patch_lang :1181 returning its scope, GridExecutor.__init__(..., pre_run_hooks=[]) :1258;
triton/language/semantic.py: TritonSemantic._load_legacy :1017, _store_legacy :1239).
"""
from __future__ import annotations

import triton
from triton.language import semantic as _semantic_mod
from triton.runtime import interpreter as _interp


class Generation36:
    line = "stock triton 3.6/3.7"
    # TritonSemantic methods that receive the pointer of a plain (non block-pointer) tl.load /
    # tl.store first: sim/interp.py notes there whether the pointer is a scalar or a block
    scalar_access_methods = ("_load_legacy", "_store_legacy")

    @classmethod
    def matches(cls) -> bool:
        return hasattr(_interp, "_LangPatchScope") and hasattr(_semantic_mod.TritonSemantic, "_load_legacy")

    @classmethod
    def entry_points(cls) -> tuple:
        """(owner, name) of everything this adapter and sim/interp.py use (the canary's list)."""
        from triton.runtime.jit import JITFunction
        B, S = _interp.InterpreterBuilder, _semantic_mod.TritonSemantic
        common = (
            # the kernel mode per launch: a JITFunction's launch and helper call are dispatched
            (JITFunction, "run"), (JITFunction, "__call__"),
            (_interp, "GridExecutor"), (_interp.GridExecutor, "__call__"), (_interp, "InterpreterBuilder"),
            (_interp, "interpreter_builder"), (_interp, "_patch_lang"), (_interp, "_implicit_cvt"),
            (_interp, "_unwrap_tensor"), (_interp, "_patch_lang_tensor"), (_interp, "InterpretedFunction"),
            (_interp.InterpretedFunction, "rewrite"), (_interp, "TensorHandle"), (_interp, "_get_np_dtype"),
            (B, "create_masked_load"), (B, "create_masked_store"), (B, "create_load"), (B, "create_store"),
            (B, "create_atomic_rmw"),
            (B, "create_atomic_cas"), (B, "create_get_program_id"), (B, "create_get_num_programs"),
            (B, "create_dot"), (B, "create_addptr"), (B, "create_fp_trunc"), (B, "set_grid_dim"), (B, "set_grid_idx"), (B, "create_barrier"),
            (B, "create_print"), (triton.knobs.runtime, "interpret"),
            # triton-ascend's shape rule wraps stock Triton's two power-of-two checks
            # (triton_dist/language/ascend_shapes.py)
            (S, "arange"), (triton.language.core, "validate_block_shape"),
        )
        return common + tuple((B, name) for name, _ in cls.pointer_ops()) + \
            tuple((S, name) for name in cls.scalar_access_methods) + cls.own_entry_points()

    @classmethod
    def own_entry_points(cls) -> tuple:
        return ((_interp, "_LangPatchScope"),)

    @classmethod
    def missing(cls) -> list:
        out = []
        for owner, name in cls.entry_points():
            if not hasattr(owner, name):
                out.append(f"{getattr(owner, '__name__', owner)}.{name}")
        return out

    @staticmethod
    def pointer_ops() -> tuple:
        """Builder ops that move pointers without changing which allocation they point into:
        (name, positions of the pointer operands)."""
        return (("create_splat", (1,)), ("create_broadcast", (0,)), ("create_expand_dims", (0,)),
                ("create_reshape", (0,)), ("create_trans", (0,)), ("create_bitcast", (0,)),
                ("create_unsplat", (0,)), ("create_select", (1, 2)), ("create_cat", (0, 1)),
                ("create_join", (0, 1)))

    # -- the interpreter's builder -------------------------------------------------------------
    @staticmethod
    def builder_class():
        """The class of the builder the interpreter runs kernels with (its methods are the
        simulator's device ops)."""
        return type(_interp.interpreter_builder)

    def install_device_ops(self, builder_class) -> None:
        """triton-ascend's extension ops as builder methods (stock triton has none): the
        simulator's, behind its own triton.language.extra.cann.extension (sim/compat/cann.py)."""
        from .. import cann_device
        for name in cann_device.ROUTED + cann_device.VALUE_OPS:
            setattr(builder_class, name, getattr(cann_device, name))
        # and triton-ascend's shape rule, which its language has with its extension ops
        self.lift_power_of_two()

    def lift_power_of_two(self) -> None:
        """triton-ascend's shape rule (non-power-of-two aranges and block shapes) for the simulator's
        program instances: stock 3.5-3.9 check it in the same two places, TritonSemantic.arange and
        triton.language.core.validate_block_shape (3.6.0 wheel: semantic.py:582, _utils.py:53 via
        core.py:708/1667), which triton_dist/language/ascend_shapes.py wraps."""
        from triton_dist.language import ascend_shapes
        ascend_shapes.install(_semantic_mod.TritonSemantic, triton.language.core)
        ascend_shapes.add_thread_rule(_on_a_simulated_core)

    # -- patching triton.language for a launch -----------------------------------------------------
    def patch_lang(self, original_patch_lang, fn):
        """Patch triton.language for running `fn` interpreted; returns what undoes it (.restore())."""
        return original_patch_lang(fn)

    def empty_scope(self):
        """What `_patch_lang` returns while a launch has patched everything already."""
        return _interp._LangPatchScope()

    def lang_tensor_patch(self, orig, index):
        """_patch_lang_tensor, also installing `index` as tl.tensor.__index__ (numpy >= 2.4
        refuses int() of a shape-(1,) array, which triton 3.6's own __index__ does)."""
        def patch(tensor, scope):
            orig(tensor, scope)
            scope.set_attr(tensor, "__index__", index)
        return patch

    # -- the launch -------------------------------------------------------------------------------
    @staticmethod
    def pre_run_hooks(executor) -> list:
        return executor.pre_run_hooks


def _on_a_simulated_core() -> bool:
    from .. import context
    return context.core() is not None
