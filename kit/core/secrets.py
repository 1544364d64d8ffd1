"""Secret-looking names: what the kit never writes out as it found it.

    redact({"HF_TOKEN": "abc", "PATH": "/bin"})   # {"HF_TOKEN": "<redacted>", "PATH": "/bin"}

The published programs' command records (kit.config.reference) redact their environment with this; the bundle's
text redaction (kit.audit.redact) looks for keys ending in these markers. scripts/reference/launch.py runs on hosts
without the kit and keeps its own copy of the list (tests/test_reference.py checks that the two are equal).
"""

from __future__ import annotations

SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "KEY", "CREDENTIAL", "AUTH", "COOKIE")
REDACTED = "<redacted>"


def redact(env: dict[str, str]) -> dict[str, str]:
    """Values of variables whose names look like secrets are not written anywhere."""
    return {k: (REDACTED if any(m in k.upper() for m in SECRET_MARKERS) else v) for k, v in env.items()}
