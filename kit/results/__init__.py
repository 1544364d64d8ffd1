"""Logs to figures (pure): parsers (one per format) -> extract -> stats -> report, exporters, sections; compare."""
