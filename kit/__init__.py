"""Training Benchmark Reproducibility Kit."""

__version__ = "0.1.0"
