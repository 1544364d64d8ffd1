"""Fabric tasks: thin wrappers wiring the kit's stages together (re-exported by fabfile.py).

Each task only builds a `kit` command line and runs it in-process, so `fab report ...` and
`kit report ...` are the same code path. A non-zero exit code becomes `invoke.exceptions.Exit`
so `fab` exits with it. `kit.cli` is imported lazily: `fab --list` must work even when a
stage's optional dependencies are broken.
"""

from __future__ import annotations

from fabric import task
from invoke.exceptions import Exit

__all__ = ["bench", "report", "crosscheck", "extract"]


def _run_kit(argv: list[str]) -> None:
    import kit.cli

    rc = kit.cli.main(argv) or 0
    if rc != 0:
        raise Exit(code=rc)


@task(help={"suite": "built-in suite name or suite YAML (default: local)", "resume": "run directory to finish"})
def bench(c, suite="local", resume=None):
    """Run a suite on this host with the kit's harness, then report (kit bench)."""
    _run_kit(["bench", "--resume", resume] if resume else ["bench", "--suite", suite])


@task(help={"run-dir": "run directory (DLPerf layout)", "out": "output directory"})
def report(c, run_dir, out=None):
    """Report a run directory (kit report)."""
    argv = ["report", run_dir]
    if out:
        argv += ["--out", out]
    _run_kit(argv)


@task(help={"claims": "claims YAML (published figures + logs)"})
def crosscheck(c, claims):
    """Re-derive published figures (kit crosscheck)."""
    _run_kit(["crosscheck", claims])


@task(help={"log": "training log file", "fmt": "log format, or auto to detect"})
def extract(c, log, fmt="auto"):
    """Extract a log's throughput (kit extract)."""
    _run_kit(["extract", log, "--format", fmt])
