"""A test-only RBFSampler whose state logs every unpickling (pid per line) to a file.

Lives in its own module so LocalCluster worker processes can import it by name.
"""

import os
from dataclasses import dataclass

from dkapprox.kernel_approximation.rbf import FourierState, RBFSampler


def _rebuild(log_path, weights, offset):
    with open(log_path, "a") as log:
        log.write(f"{os.getpid()}\n")
    return CountingState(weights, offset, log_path)


@dataclass(frozen=True)
class CountingState(FourierState):
    log_path: str = ""

    def __reduce__(self):
        return _rebuild, (self.log_path, self.weights, self.offset)


class CountingRBFSampler(RBFSampler):
    def __init__(self, *, gamma=1.0, n_components=100, random_state=None, log_path=""):
        super().__init__(gamma=gamma, n_components=n_components, random_state=random_state)
        self.log_path = log_path

    def _state(self, dtype):
        state = super()._state(dtype)
        return CountingState(state.weights, state.offset, self.log_path)
