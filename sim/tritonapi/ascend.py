"""triton-ascend's main line (triton-lang/triton-ascend a84b1eb5, Ascend/triton-ascend eeb030e7):
Triton 3.5.0's interpreter plus python/triton/runtime/ascend_interpreter.py.  Differences from
stock 3.5 (g35), read at those commits:
- the interpreter's builder is an AscendInterpreterBuilder (interpreter.py :1201-1206), whose
  extension ops are builder methods: create_get_sub_vec_id (:429), sync_block_set/wait/all
  (:449-481, no-ops), the data ops create_extract_scalar, create_insert_slice,
  create_extract_slice, create_index_select_simd, create_gather_out_to_ub,
  create_scatter_ub_to_out, create_index_put, create_sort, create_flip (:224-651);
- `_patch_lang` ends with interpreter_builder.patch_extensions(fn) (interpreter.py :1152),
  which also sets triton.language.extra.cann.extension's scope/parallel and tl.reduce;
- GridExecutor.__call__ runs the grid through execute_with_sub_vec_simulation (:1323), twice
  in sequence when sub_vec_id was read.

The real triton.language.extra.cann.extension stays the kernels' frontend (its argument
checks, its builder calls); the simulator's models replace the builder methods behind it
where the simulator knows more than a sequential interpreter: sub_vec_id answers for the
block's two concurrent sub-core instances (sim/runtime.py), sync_block_* synchronize
the block's concurrent cube and vector instances (sim/cann_device.py, sim/core_split.py),
scope(core_mode=...) says which of them owns the ops inside, and the ops that read or write global memory go through the
simulator's memory model.  The value-only data ops (slices, get_element, sort, flip) keep
triton-ascend's own implementations.  The grid executor is the simulator's, so the
sequential re-run never happens.
"""
from __future__ import annotations

import importlib

from triton.runtime import interpreter as _interp

from .g35 import Generation35, _is_ascend_builder

EXTENSION = "triton.language.extra.cann.extension"


class AscendMain(Generation35):
    line = "triton-ascend main (Triton 3.5 + Ascend interpreter)"

    @classmethod
    def matches(cls) -> bool:
        return not hasattr(_interp, "_LangPatchScope") and _is_ascend_builder()

    @classmethod
    def own_entry_points(cls) -> tuple:
        from .. import cann_device           # ROUTED: replaced by the simulator's; VALUE_OPS: its own kept
        B = _interp.AscendInterpreterBuilder
        return tuple((B, name) for name in cann_device.ROUTED + cann_device.VALUE_OPS + ("patch_extensions",))

    @staticmethod
    def patched_objects() -> list:
        import importlib
        ext = importlib.import_module(EXTENSION)
        return Generation35.patched_objects() + [ext]

    def install_device_ops(self, builder_class) -> None:
        from .. import cann_device
        for name in cann_device.ROUTED:
            setattr(builder_class, name, getattr(cann_device, name))
        from .. import tile_slices           # its own slices and element reads, with their bounds checked first
        tile_slices.check_own(builder_class)
        # triton-ascend's frontend checks the power-of-two rule in SIMT mode only
        # (python/triton/language/semantic.py:634-638, _utils.py:53-55 commented out, at a84b1eb5):
        # ascend_shapes.install() finds nothing to do there; on a frontend that still has stock
        # Triton's rule (the test doubles' stock 3.5.1 language) it lifts it
        self.lift_power_of_two()
        # the extension's frontend reaches sub_vec_id through builder._ascend_builder (set on
        # compile builders only, extension/builder.py :65; semantic.py :90)
        builder_class._ascend_builder = property(lambda self: self)
        # patch_extensions (ascend_interpreter.py :148, at every kernel call) makes the extension's
        # scope a no-op context (:119-122); the simulator's scope says which core owns the ops
        # inside (sim/core_split.py)
        orig = getattr(builder_class.patch_extensions, "_td_orig", builder_class.patch_extensions)

        def patch_extensions(self, fn):
            orig(self, fn)
            from ..compat import ascend_cast, cann
            ext = importlib.import_module(EXTENSION)
            ext.scope = cann.scope
            # cast(overflow_mode="saturate") with the NPU's result: triton-ascend's interpreter
            # refuses the mode ("overflow_mode is not supported in interpreter mode",
            # ascend_interpreter.py:727-729); the simulator's cast clamps (sim/compat/ascend_cast.py)
            ext.cast = ascend_cast.cast
            ascend_cast.install()
        patch_extensions._td_orig = orig
        builder_class.patch_extensions = patch_extensions

    def extension_module(self):
        """The real triton.language.extra.cann.extension (sim/compat/cann.py steps aside)."""
        import importlib
        return importlib.import_module(EXTENSION)
