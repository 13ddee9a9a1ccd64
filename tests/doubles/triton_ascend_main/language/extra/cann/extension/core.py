"""Test double of extension/core.py (triton-ascend a84b1eb5): builtin (:40, requires _semantic),
sub_vec_id (:150), create_sync_block (:181), sync_block_set/wait/all (:213-241), sub_vec_num
(:353, asks the NPU there: 2 here)."""
import enum
from functools import wraps

import triton.language.core as tl
from triton.language.core import _unwrap_if_constexpr

from . import semantic

PIPE = semantic.PIPE
TRITON_BUILTIN = "__triton_builtin__"
ASCEND_BUILTIN = "__ascend_builtin__"


def builtin(fn):
    @wraps(fn)
    def wrapper(*args, **kwargs):
        if "_semantic" not in kwargs or kwargs["_semantic"] is None:
            raise ValueError("Did you forget to add @triton.jit ? "
                             "(`_semantic` argument must be provided outside of JIT functions.)")
        return fn(*args, **kwargs)
    setattr(wrapper, TRITON_BUILTIN, True)
    setattr(wrapper, ASCEND_BUILTIN, True)
    return wrapper


def is_builtin(fn) -> bool:
    return getattr(fn, ASCEND_BUILTIN, False)


class int64(int):
    def __new__(cls, value):
        obj = int.__new__(cls, value)
        obj.type = tl.int64
        return obj


class CORE(enum.Enum):
    VECTOR = "VECTOR"
    CUBE = "CUBE"
    CUBE_OR_VECTOR = "CUBE_OR_VECTOR"
    CUBE_AND_VECTOR = "CUBE_AND_VECTOR"


class MODE(enum.Enum):
    SIMD = "SIMD"
    SIMT = "SIMT"
    MIX = "MIX"


class SYNC_IN_VF(enum.Enum):
    VV_ALL = enum.auto()
    VST_VLD = enum.auto()


@builtin
def sub_vec_id(_semantic=None) -> tl.tensor:
    return semantic.sub_vec_id(_semantic)


def create_sync_block(sender, receiver, event_id, is_set: bool, sender_pipe=None, receiver_pipe=None,
                      _semantic=None):
    sender, receiver = _unwrap_if_constexpr(sender), _unwrap_if_constexpr(receiver)
    assert sender in ("cube", "vector") and receiver in ("cube", "vector")
    if isinstance(event_id, int):
        assert 0 <= event_id < 16
    if sender == receiver:
        raise ValueError(f'Unexpected pair: {sender} -> {receiver}, only supports cube -> vector or vector -> cube')
    if sender_pipe is None and receiver_pipe is None:
        sender_pipe, receiver_pipe = ((PIPE.PIPE_FIX, PIPE.PIPE_MTE2) if sender == "cube"
                                      else (PIPE.PIPE_MTE3, PIPE.PIPE_MTE2))
    if is_set:
        return semantic.create_sync_block_set(sender, receiver, event_id, sender_pipe, receiver_pipe, _semantic)
    return semantic.create_sync_block_wait(sender, receiver, event_id, sender_pipe, receiver_pipe, _semantic)


@builtin
def sync_block_set(sender, receiver, event_id, sender_pipe=None, receiver_pipe=None, _semantic=None):
    return create_sync_block(sender, receiver, event_id, True, sender_pipe, receiver_pipe, _semantic)


@builtin
def sync_block_wait(sender, receiver, event_id, sender_pipe=None, receiver_pipe=None, _semantic=None):
    return create_sync_block(sender, receiver, event_id, False, sender_pipe, receiver_pipe, _semantic)


@builtin
def sync_block_all(mode, event_id, _semantic=None):
    mode, event_id = _unwrap_if_constexpr(mode), _unwrap_if_constexpr(event_id)
    assert isinstance(event_id, int) and 0 <= event_id < 16
    assert mode in ("all_cube", "all_vector", "all", "all_sub_vector")
    _semantic.builder.sync_block_all(mode, event_id)


@builtin
def debug_barrier(sync_mode, _semantic=None):
    pass


@builtin
def sub_vec_num(_semantic=None) -> tl.constexpr:
    return tl.constexpr(2)
