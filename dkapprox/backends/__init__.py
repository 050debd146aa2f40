"""How a block is computed: NumPy, compiled (numba) and device (CuPy) kernels, array namespaces, recycled outputs."""
