"""Test double of extension/scope.py (triton-ascend a84b1eb5): scope(core_mode) (:49)."""


class scope:
    def __init__(self, core_mode: str, _builder=None, _semantic=None, **kwargs):
        self.core_mode = core_mode
        self._builder = _builder
        if core_mode not in ("cube", "vector"):
            raise ValueError(f'core_mode must be "cube" or "vector", got {core_mode}')

    def __enter__(self):
        if self._builder is None:
            raise RuntimeError("scope can only be used inside a Triton kernel")
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        return False
