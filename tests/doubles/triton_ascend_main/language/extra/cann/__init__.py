"""Test double of third_party/ascend/language/cann/__init__.py (triton-ascend a84b1eb5), installed
as triton.language.extra.cann; libdevice is not doubled."""
from . import extension

__all__ = ["extension"]
