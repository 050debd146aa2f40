"""Small helpers every floor above may use: scikit-learn compatibility, hashing, CPUs, progress, xarray."""
