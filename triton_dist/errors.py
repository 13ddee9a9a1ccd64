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


class _Reported:
    """A launch failure with a message and a report of where each rank was (the board's words):
    what DeadlockError and LaunchTimeoutError share."""

    def __init__(self, message: str, report: str = ""):
        self.message = message
        self.report = report
        super().__init__(message + ("\n" + report if report else ""))

    def __str__(self):            # message and report as they are now (a replay line may be added)
        return self.message + ("\n" + self.report if self.report else "")

    def __reduce__(self):
        return (type(self), (self.message, self.report))


class DeadlockError(_Reported, RuntimeError):
    """The ranks could make no progress: every unfinished task waits for something no task
    can do any more.

    ``report`` names every stuck rank and core, the primitive it waits in, the kernel
    line, the address (symmetric tensor + offset where known) and the value awaited
    versus the value seen.  A launch that merely ran too long raises LaunchTimeoutError.
    """


class LaunchTimeoutError(_Reported, TimeoutError):
    """A launch (or one wait inside it) ran past its `timeout` while its ranks could still be
    making progress: not a deadlock verdict.  A TimeoutError, so `except TimeoutError` catches
    it; not a DeadlockError.

    ``report`` says where each unfinished rank was when time ran out (the same words as a
    deadlock report); the ranks' Python stacks went to stderr.
    """


def race_report(races) -> str:
    """The text of a race check's findings: a head line, then one numbered line per race
    (its str(); the simulator's sim.race.Race)."""
    if not races:
        return "no races"
    head = f"{len(races)} race{'s' if len(races) != 1 else ''} on symmetric memory " \
           f"(unordered conflicting accesses, one per pair of kernel lines):"
    return head + "".join(f"\n  {i + 1}. {r}" for i, r in enumerate(races))


class RaceError(TritonDistError):
    """A launch with race_check=True found races.

    ``races``: the list of Race; ``result``: the LaunchResult of the launch (its values
    and the same races); str() is the full report.
    """

    def __init__(self, races, result=None):
        self.races = races
        self.result = result
        super().__init__(race_report(races))

    def __reduce__(self):
        return (RaceError, (self.races, self.result))


# What a failed launch raises: the types a caller of launch() (the CLI, pytest) catches.
LAUNCH_FAILURES = (RankError, DeadlockError, LaunchTimeoutError, RaceError)
