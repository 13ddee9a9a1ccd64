"""Errors raised to users of triton_dist.  Each says what was wrong and what to do."""
from __future__ import annotations


class TritonDistError(RuntimeError):
    """A user mistake caught by triton_dist (bad argument, mismatched collective, ...)."""


class RankError(RuntimeError):
    """A rank raised (or died); the other ranks were torn down.

    ``rank``: the failing rank; ``exc_type``: the name of the exception type it raised;
    ``traceback``: the rank's formatted traceback (text).
    """

    def __init__(self, rank: int, exc_type: str, message: str, traceback: str = ""):
        self.rank = rank
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback
        super().__init__(f"rank {rank} raised {exc_type}: {message}")

    def __reduce__(self):
        return (RankError, (self.rank, self.exc_type, self.message, self.traceback))

    def __str__(self):
        text = f"rank {self.rank} raised {self.exc_type}: {self.message}"
        if self.traceback:
            text += "\n--- traceback of rank %d ---\n%s" % (self.rank, self.traceback.rstrip())
        return text


class DeadlockError(RuntimeError):
    """The ranks could make no progress (or the launch timed out).

    ``report`` names every stuck rank and core, the primitive it waits in, the kernel
    line, the address (symmetric tensor + offset where known) and the value awaited
    versus the value seen.
    """

    def __init__(self, message: str, report: str = ""):
        self.message = message
        self.report = report
        super().__init__(message + ("\n" + report if report else ""))

    def __reduce__(self):
        return (DeadlockError, (self.message, self.report))
