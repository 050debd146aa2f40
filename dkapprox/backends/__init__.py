"""How a block is computed: NumPy, compiled (numba) and device (CuPy) kernels, array namespaces, recycled outputs."""

from ._jit import INNER_PRODUCT, binning_cells, fourier_map, inner_product_kernel, pairwise_kernel, rbf_exponents
from ._recycle import empty
from ._stats import combine_block_moments, moments
from ._xp import (
    cuda_blocks,
    cupy_kernel,
    device_of,
    fit_device,
    fit_namespace,
    fitting_on,
    fourier,
    host_blocks,
    is_cupy,
    matmul_into,
    namespace,
    numpy_dtype,
    state_on,
    to_numpy,
    truth_later,
)
