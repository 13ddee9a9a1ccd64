"""schedule="random": at every scheduling point, a runnable task chosen uniformly."""
from .deterministic import DeterministicScheduler


class RandomScheduler(DeterministicScheduler):
    name = "random"

    def choose(self, candidates, me):
        return int(candidates[self.rand() % candidates.size])
