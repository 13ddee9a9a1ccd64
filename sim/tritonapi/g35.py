"""Stock triton 3.5 (3.5.1 wheel, triton/runtime/interpreter.py):
- `_patch_lang(fn)` :1111 patches triton.language with plain setattr and returns nothing:
  there is no _LangPatchScope, so nothing undoes it.  The simulator must undo it after each
  launch (a kernel traced for a device later in the process would otherwise meet the
  interpreter's builtins), so `patch_lang` snapshots what _patch_lang may touch and
  `LangSnapshot.restore()` puts it back;
- `_patch_lang_tensor(tensor)` :802 takes no scope;
- GridExecutor.__init__(fn, arg_names, grid) :1184 has no pre_run_hooks.
"""
from __future__ import annotations

import triton.language as tl
from triton.runtime import interpreter as _interp

from .g36 import Generation36


class LangSnapshot:
    """The attributes of `objects` (modules and classes) now; restore() puts them back and
    removes what was added since."""

    def __init__(self, objects):
        self.saved = [(obj, dict(vars(obj))) for obj in objects]

    def restore(self) -> None:
        for obj, before in self.saved:
            now = vars(obj)
            for name in [n for n in now if n not in before]:
                delattr(obj, name)
            for name, value in before.items():
                if now.get(name, _MISSING) is not value:
                    setattr(obj, name, value)


_MISSING = object()


class _NoScope:
    def restore(self) -> None:
        pass


class Generation35(Generation36):
    line = "stock triton 3.5"

    @classmethod
    def matches(cls) -> bool:
        return not hasattr(_interp, "_LangPatchScope") and not _is_ascend_builder()

    @classmethod
    def own_entry_points(cls) -> tuple:
        return ()

    @staticmethod
    def patched_objects() -> list:
        """Everything 3.5's _patch_lang sets attributes on (interpreter.py :787-1122)."""
        return [tl, tl.core, tl.math, tl.core.tensor, tl.core.dtype, tl.core.tensor_descriptor_base]

    def patch_lang(self, original_patch_lang, fn):
        snap = LangSnapshot(self.patched_objects())
        original_patch_lang(fn)
        return snap

    def empty_scope(self):
        return _NoScope()

    def lang_tensor_patch(self, orig, index):
        def patch(tensor):
            orig(tensor)
            tensor.__index__ = index
        return patch

    @staticmethod
    def pre_run_hooks(executor) -> list:
        return []


def _is_ascend_builder() -> bool:
    cls = getattr(_interp, "AscendInterpreterBuilder", None)
    return cls is not None and isinstance(_interp.interpreter_builder, cls)
