"""Stock triton 3.8 and 3.9: TritonSemantic._load_legacy/_store_legacy are gone, merged into
load/store (3.8.0 wheel, triton/language/semantic.py :1002 load, :1205 store; block pointers
no longer reach them).  3.9 also changed create_masked_load/store to take one cache_policy
(interpreter.py :545, :553): sim/interp.py's versions take the trailing policy arguments as
*policy, so both signatures are served by the same code.
"""
from __future__ import annotations

from triton.language import semantic as _semantic_mod
from triton.runtime import interpreter as _interp

from .g36 import Generation36


class Generation38(Generation36):
    line = "stock triton 3.8/3.9"
    scalar_access_methods = ("load", "store")

    @classmethod
    def matches(cls) -> bool:
        return hasattr(_interp, "_LangPatchScope") and not hasattr(_semantic_mod.TritonSemantic, "_load_legacy")
