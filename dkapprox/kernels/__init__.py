"""Kernels every family shares: the Kernel class, its slices on CPUs and devices, and the exact chi-squared kernels."""
