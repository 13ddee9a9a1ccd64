"""triton-ascend's shape rules for `tl.arange` and block shapes, applied to stock Triton's frontend.

Stock Triton refuses an arange whose range is not a power of two (semantic.py, TritonSemantic.
arange: "arange's range must be a power of 2") and a block shape with such a dimension
(_utils.validate_block_shape, which triton.language.core imports by name and calls from
block_type.__init__ and tl.full/zeros).  triton-ascend lifts both for its default (SIMD) mode,
read at triton-lang/triton-ascend a84b1eb52b6215e2c171632f2df0892f1003cfc8:
- python/triton/language/semantic.py:624-640, `arange`: the int32, constexpr and end > start
  checks stay; the power-of-two check runs only `if self.builder.is_simt_mode()`;
- python/triton/_utils.py:49-61, `validate_block_shape`: the power-of-two check is commented out
  ("FIXME:patched triton community"); the constexpr-int check and the numel limit
  (TRITON_MAX_TENSOR_NUMEL = 1048576, _utils.py:11) stay;
- third_party/ascend/backend/compiler.py:69-70, `min_dot_size` -> (1, 1, 1): a tl.dot of any
  shape (backend_ascend/frontend.py's ASCEND_MIN_DOT_SIZE; Triton's interpreter has the same).

This module is that one rule for both places that run stock Triton's frontend as triton-ascend's:
the simulator (sim/interp.py: its program instances) and the Ascend frontend's trace
(backend_ascend/frontend.py).  `install()` wraps the two stock checks; the wrappers apply
triton-ascend's rule only where `applies()` (inside `ascend_language()`, or on a thread a
registered rule claims), and stock Triton's everywhere else, so a kernel compiled for a GPU in
the same process keeps stock Triton's refusal.  The SIMT mode (triton-ascend's
`force_simt_template`) keeps the power-of-two rule there; neither user here traces SIMT.
"""
from __future__ import annotations

import contextlib
import threading

# triton-ascend _utils.py:11 (the same value as stock Triton's)
MAX_TENSOR_NUMEL = 1048576

_local = threading.local()
_thread_rules: list = []        # callables: does the calling thread run triton-ascend's language?
_installed: dict = {}
_lock = threading.Lock()


def applies() -> bool:
    """Whether the calling thread traces or runs triton-ascend's language now."""
    if getattr(_local, "depth", 0):
        return True
    return any(rule() for rule in _thread_rules)


class Scope:
    """What a trace under ascend_language() met: `non_power_of_two` once a shape stock Triton
    refuses was taken (its C++ verifier refuses it too: backend_ascend/ascend_ttir.py)."""
    non_power_of_two = False


@contextlib.contextmanager
def ascend_language():
    """Within: the calling thread's frontend follows triton-ascend's shape rules."""
    scope, outer = Scope(), getattr(_local, "scope", None)
    _local.depth = getattr(_local, "depth", 0) + 1
    _local.scope = scope
    try:
        yield scope
    finally:
        _local.depth -= 1
        _local.scope = outer


def current_scope():
    """The innermost ascend_language() scope of the calling thread, or None."""
    return getattr(_local, "scope", None)


def _took(n: int) -> None:
    if n & (n - 1):
        scope = current_scope()
        if scope is not None:
            scope.non_power_of_two = True


def add_thread_rule(rule) -> None:
    """`rule()` says whether the calling thread runs triton-ascend's language (the simulator: a
    thread running one of its program instances)."""
    with _lock:
        if rule not in _thread_rules:
            _thread_rules.append(rule)


# --- the rule, in triton-ascend's words ------------------------------------------------------------

def check_arange(start, end) -> int:
    """The range of tl.arange(start, end) as triton-ascend takes it (semantic.py:624-640 outside
    SIMT mode); ValueError with its messages otherwise."""
    if not isinstance(start, int) or not isinstance(end, int):
        raise ValueError("arange's arguments must be of type tl.constexpr")
    if bool(start >> 32) or bool(end >> 32):
        raise ValueError("arange must fit in int32")
    if end <= start:
        raise ValueError("arange's end argument must be greater than the start argument")
    _took(end - start)
    return end - start


def check_block_shape(shape) -> int:
    """The numel of a block shape as triton-ascend takes it (_utils.py:49-61); its errors otherwise."""
    numel = 1
    for i, d in enumerate(shape):
        if not isinstance(d, int):
            raise TypeError(f"Shape element {i} must have type `constexpr[int]`, got `constexpr[{type(d)}]")
        _took(d)
        numel *= d
    if numel > MAX_TENSOR_NUMEL:
        raise ValueError(f"numel ({numel}) exceeds triton maximum tensor numel ({MAX_TENSOR_NUMEL})")
    return numel


# --- on stock Triton's frontend --------------------------------------------------------------------

def stock_refuses_non_power_of_two() -> bool:
    """Whether the installed triton's frontend has stock Triton's rule (triton-ascend's has not:
    then there is nothing to install)."""
    from triton import _utils
    try:
        _utils.validate_block_shape([3])
    except ValueError:
        return True
    return False


def install(semantic_cls=None, core_module=None) -> bool:
    """Wrap stock Triton's two checks (TritonSemantic.arange, triton.language.core's
    validate_block_shape) so that they follow triton-ascend's rule where `applies()`.  Idempotent;
    returns whether the wrappers are in place (False on a triton whose frontend already lifts it)."""
    if not stock_refuses_non_power_of_two():
        return False
    if semantic_cls is None:
        from triton.language.semantic import TritonSemantic as semantic_cls
    if core_module is None:
        import triton.language.core as core_module
    with _lock:
        if _installed.get("arange") is not getattr(semantic_cls, "arange"):
            semantic_cls.arange = _arange(semantic_cls.arange)
            _installed["arange"] = semantic_cls.arange
        if _installed.get("shape") is not getattr(core_module, "validate_block_shape"):
            core_module.validate_block_shape = _block_shape(core_module.validate_block_shape)
            _installed["shape"] = core_module.validate_block_shape
    return True


def _arange(stock):
    import triton.language as tl

    def arange(self, start, end, *, ret_ty=None):
        if not applies():
            return stock(self, start, end, ret_ty=ret_ty)
        n = check_arange(start, end)
        if ret_ty is None:
            ret_ty = tl.block_type(tl.int32, [n])
        handle = self.builder.create_make_range(ret_ty.to_ir(self.builder), start, end)
        # 3.8 on build the result with make_tensor, 3.5-3.7 with the tensor class attribute
        make = getattr(self, "make_tensor", None) or self.tensor
        return make(handle, ret_ty)
    arange.__wrapped__ = stock
    return arange


def _block_shape(stock):
    def validate_block_shape(shape):
        return check_block_shape(shape) if applies() else stock(shape)
    validate_block_shape.__wrapped__ = stock
    return validate_block_shape
