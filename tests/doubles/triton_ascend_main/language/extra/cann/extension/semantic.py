"""Test double of extension/semantic.py (triton-ascend a84b1eb5): create_sync_block_set/wait
(:46-73, the event id as a tensor handle), sub_vec_id (:89, through builder._ascend_builder)."""
import enum

import triton.language.core as tl


class PIPE(enum.Enum):
    PIPE_S = "PIPE_S"
    PIPE_V = "PIPE_V"
    PIPE_M = "PIPE_M"
    PIPE_MTE1 = "PIPE_MTE1"
    PIPE_MTE2 = "PIPE_MTE2"
    PIPE_MTE3 = "PIPE_MTE3"
    PIPE_ALL = "PIPE_ALL"
    PIPE_FIX = "PIPE_FIX"


def _event(event_id, _semantic):
    if isinstance(event_id, int):
        return _semantic.to_tensor(tl.constexpr(event_id)).handle
    if isinstance(event_id, tl.constexpr):
        return _semantic.to_tensor(event_id).handle
    return event_id.handle


def create_sync_block_set(sender, receiver, event_id, sender_pipe, receiver_pipe, _semantic=None):
    _semantic.builder.sync_block_set(sender, receiver, _event(event_id, _semantic), sender_pipe.value,
                                     receiver_pipe.value)


def create_sync_block_wait(sender, receiver, event_id, sender_pipe, receiver_pipe, _semantic=None):
    _semantic.builder.sync_block_wait(sender, receiver, _event(event_id, _semantic), sender_pipe.value,
                                      receiver_pipe.value)


def sub_vec_id(_semantic=None) -> tl.tensor:
    return tl.tensor(_semantic.builder._ascend_builder.create_get_sub_vec_id(), tl.int64)
