"""gpu_sampler.py's nvidia-smi source: its header line, then nvidia-smi's own CSV (`--format=csv,nounits`).

    # telemetry 1 source smi interval_ms 100 started 1795843984.707 host vm
    timestamp, index, uuid, clocks.current.sm [MHz], ..., clocks_event_reasons.active
    2026/11/28 05:33:04.738, 0, GPU-45d3..., 345, 3201, 1980, 78.04, 78.99, 700.00, 33, 0, 0, 0, 0x0000000000000001

Columns are found by name (a driver lacking a field leaves it out; drivers before 535 say
clocks_throttle_reasons.active); '[N/A]' and '[Not Supported]' read as None. power_w is power.draw (what NVML's
power usage reads; an average over about a second on recent GPUs), power.draw.instant where only that is there;
power_instant_w is power.draw.instant (what energy is integrated from). There is no energy counter: energy_mj is
None.

The clock: nvidia-smi prints local wall time without a zone. The sampler writes the header's `started` (epoch
seconds) just before it starts nvidia-smi, so the first row's wall time minus `started` is the host's UTC offset
plus a fraction of a second; rounded to the nearest 15 minutes (every zone's offset is a multiple of that) it
anchors every row: t = the row's wall time read as UTC - that offset (a first row more than a minute off a
whole offset is refused: no anchor). A zone change during the recording (a daylight-saving switch) is not
followed.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from kit.telemetry.records import NOT_AVAILABLE, Gpu, Sample, Telemetry, TelemetryError, number

HEADER = "# telemetry "
ZONE_STEP_S = 900  # UTC offsets are whole quarter hours
ANCHOR_SLACK_S = 60  # the first row comes within this of the header's started (plus the zone's offset)
TIME_FORMAT = "%Y/%m/%d %H:%M:%S.%f"
COLUMNS = {  # nvidia-smi field -> Sample field
    "clocks.current.sm": "sm_mhz",
    "clocks.current.memory": "mem_mhz",
    "enforced.power.limit": "limit_w",
    "temperature.gpu": "temp_c",
    "utilization.gpu": "util_gpu",
    "utilization.memory": "util_mem",
    "utilization.jpeg": "util_jpeg",
    "memory.used": "mem_used_mib",
}
POWER_COLUMNS = ("power.draw", "power.draw.instant")  # power_w: the first there
REASON_COLUMNS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
_UNIT = re.compile(r"\s*\[[^\]]*\]$")  # 'clocks.current.sm [MHz]' -> 'clocks.current.sm'


def read_header(text: str, path: str) -> dict:
    """'# telemetry 1 source smi interval_ms 100 started T host H' as {'telemetry': '1', 'source': 'smi', ...}."""
    words = text[len(HEADER):].split()
    if len(words) % 2 == 0:
        raise TelemetryError(path, f"a telemetry header line of unpaired words: {text.strip()[:120]!r}", 1)
    return {"telemetry": words[0], **dict(zip(words[1::2], words[2::2], strict=True))}


def _wall(text: str, path: str, line: int) -> float:
    """The row's wall time read as if it were UTC, in seconds."""
    try:
        return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise TelemetryError(path, f"{text[:40]!r} is not nvidia-smi's 'YYYY/MM/DD HH:MM:SS.mmm'", line,
                             "timestamp") from None


def parse(path: str, header: dict, lines: list[str]) -> Telemetry:
    """The nvidia-smi file whose header line read as HEADER and whose lines after it are LINES (line 2 onwards)."""
    interval = number(header.get("interval_ms"), path, 1, "interval_ms")
    started = number(header.get("started"), path, 1, "started")
    if interval is None or interval <= 0 or started is None:
        raise TelemetryError(path, "the header needs interval_ms > 0 and started", 1)
    rows = [(n, text) for n, text in enumerate(lines, 2) if text.strip()]
    if not rows:
        return Telemetry(path, "smi", header.get("host"), interval / 1000, started, (), ())
    head_line, head = rows[0]
    names = [_UNIT.sub("", c.strip()) for c in head.split(",")]
    if "timestamp" not in names or "index" not in names:
        raise TelemetryError(path, f"nvidia-smi's header row needs timestamp and index, got {head.strip()[:120]!r}",
                             head_line)
    col = {name: i for i, name in enumerate(names)}
    reasons_at = next((col[c] for c in REASON_COLUMNS if c in col), None)
    measures = [(field, col.get(name)) for name, field in COLUMNS.items()]
    measures.append(("power_w", next((col[c] for c in POWER_COLUMNS if c in col), None)))
    measures.append(("power_instant_w", col.get("power.draw.instant")))
    offset = None
    samples, gpus = [], {}
    for line, text in rows[1:]:
        if text == head:
            continue  # nvidia-smi printed its header again
        cells = [c.strip() for c in text.split(",")]
        if len(cells) != len(names):
            raise TelemetryError(path, f"{len(cells)} fields where the header row names {len(names)} (a cut line?)",
                                 line)
        wall = _wall(cells[col["timestamp"]], path, line)
        if offset is None:
            offset = round((wall - started) / ZONE_STEP_S) * ZONE_STEP_S
            if abs(wall - started - offset) > ANCHOR_SLACK_S:
                raise TelemetryError(path, f"the first row is {wall - started - offset:+.0f} s from a whole zone "
                                           "offset of the header's started: its clock cannot be anchored", line,
                                     "timestamp")
        index = number(cells[col["index"]], path, line, "index")
        if index is None or index != int(index):
            raise TelemetryError(path, f"{cells[col['index']]!r} is not a GPU index", line, "index")
        values = {field: None if at is None else number(cells[at], path, line, names[at]) for field, at in measures}
        reasons = None
        if reasons_at is not None and cells[reasons_at] and cells[reasons_at] not in NOT_AVAILABLE:
            try:
                reasons = int(cells[reasons_at], 16)  # '0x0000000000000004'
            except ValueError:
                raise TelemetryError(path, f"{cells[reasons_at][:40]!r} is not a hexadecimal bitmask", line,
                                     names[reasons_at]) from None
        sample = Sample(wall - offset, int(index), energy_mj=None, reasons=reasons, **values)
        samples.append(sample)
        if sample.gpu not in gpus:
            at = col.get("clocks.max.sm")
            max_sm = None if at is None else number(cells[at], path, line, names[at])
            name = cells[col["name"]] if "name" in col else None
            gpus[sample.gpu] = Gpu(sample.gpu, name, cells[col["uuid"]] if "uuid" in col else None, max_sm, None,
                                   sample.limit_w)
    return Telemetry(path, "smi", header.get("host"), interval / 1000, started, tuple(gpus.values()), tuple(samples))
