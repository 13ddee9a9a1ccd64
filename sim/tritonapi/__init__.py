"""Which Triton API generation the installed triton is, and its adapter.

The simulator patches one thing, Triton's interpreter (sim/interp.py); the interpreter's
internals differ between releases.  Each generation has one adapter class here, saying how
that generation does what sim/interp.py needs (patch `triton.language` for one launch and
undo it, tell a scalar access from a block access, run a launch's pre-run hooks, ...), and
which entry points it relies on (tests/test_canary.py checks them).  The adapter is chosen
by feature detection on the imported triton, never by version number, and nothing outside
sim/interp.py asks which one is live.

Generations (what tells them apart, measured on each wheel; docs in each module):
- g35.Generation35: stock 3.5 (`_patch_lang` patches for good and returns nothing; no
  GridExecutor.pre_run_hooks);
- ascend.AscendMain: triton-ascend's main line, 3.5 plus runtime/ascend_interpreter.py
  (the interpreter's builder is an AscendInterpreterBuilder);
- g36.Generation36: stock 3.6 and 3.7 (`_LangPatchScope`; TritonSemantic._load_legacy);
- g38.Generation38: stock 3.8 and 3.9 (_load_legacy/_store_legacy merged into load/store).
The `_builder` generation (3.2) and 3.4 are refused before this runs (triton_dist/requirements.py).
"""
from __future__ import annotations

from triton_dist.requirements import SUPPORTED_LINES

from .ascend import AscendMain
from .g35 import Generation35
from .g36 import Generation36
from .g38 import Generation38

# most specific first: triton-ascend's main line is a 3.5 with more
GENERATIONS = (AscendMain, Generation35, Generation36, Generation38)


def detect():
    """The adapter of the installed triton; ImportError naming the supported lines if none fits."""
    import triton
    for cls in GENERATIONS:
        if cls.matches():
            missing = cls.missing()
            if missing:
                raise ImportError(
                    f"triton {triton.__version__} looks like {cls.line}, but its interpreter lacks "
                    f"{', '.join(missing)} (sim/tritonapi/ needs them). Supported: {'; '.join(SUPPORTED_LINES)}")
            return cls()
    raise ImportError(f"the simulator has no adapter for triton {triton.__version__} ({triton.__file__}): its "
                      f"interpreter matches none of the supported lines: {'; '.join(SUPPORTED_LINES)}")
