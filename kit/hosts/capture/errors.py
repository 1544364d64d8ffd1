"""The one error of the capture parsers."""

from __future__ import annotations

from kit.core.inputs import InputError


class EnvCaptureError(InputError):
    """A probe output that cannot be read; str() is one line: 'source[:line]: reason'."""
