"""Training Benchmark Reproducibility Kit."""

from pathlib import Path

__version__ = "0.1.0"
REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout: scripts/, docker/, data_prep/ beside kit/
