"""The `kit` command line: one module per subcommand."""

from kit.cli.main import main

__all__ = ["main"]
