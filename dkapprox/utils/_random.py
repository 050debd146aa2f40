"""Counter-based hashing of global row indices: the same number for a row however the data is chunked."""

from __future__ import annotations

import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio: SplitMix64's increment
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
#: MurmurHash3's 64-bit finalizer (random binning's hash, and its compiled loop in ``_jit_kernels``)
FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
FMIX_S33, FMIX_S32, FMIX_ONE = np.uint64(33), np.uint64(32), np.uint64(1)


def splitmix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer applied to a fresh uint64 array, in place (uint64 arithmetic wraps, as it should)."""
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def fmix64(h):
    """MurmurHash3's finalizer, in place on a uint64 array: every output bit depends on every input bit."""
    h ^= h >> FMIX_S33
    h *= FMIX1
    h ^= h >> FMIX_S33
    h *= FMIX2
    h ^= h >> FMIX_S33
    return h
