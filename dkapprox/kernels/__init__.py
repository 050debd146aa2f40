"""Kernels every family shares: the Kernel class, its slices on CPUs and devices, and the exact chi-squared kernels."""

from ._device import DEVICE_KERNELS, device_between, device_diagonal
from ._exact import chi2_sum_kernel, skewed_chi2_kernel
from ._pairwise import (
    DEVICE_SLICE_ELEMENTS,
    SLICE_ELEMENTS,
    Kernel,
    RBFSlices,
    is_precomputed,
    kernel_params,
    kernel_slices,
    row_slices,
)
