"""commands.json: the command lines a run recorded in run.json (each run's, and each host's of a multi-node run),
secret values redacted. The bundle writes it (kit.audit.bundle); `kit verify` recomputes it from run.json and
compares (kit.audit.rules.derived)."""

from __future__ import annotations

import json

from kit.audit.redact import redact_text


def recorded_commands(meta: dict) -> dict:
    """run.json's per-run command lines (and per-host ones of multi-node runs), secrets redacted."""
    out = {}
    for log, entry in sorted((meta.get("runs") or {}).items()):
        item = {k: entry[k] for k in ("case", "repeat", "status", "command", "argv", "env") if k in entry}
        hosts = {h: v.get("command") for h, v in (entry.get("hosts") or {}).items() if v.get("command")}
        if hosts:
            item["hosts"] = hosts
        out[log] = item
    text, _ = redact_text(json.dumps(out, indent=2, sort_keys=True))
    return json.loads(text)
