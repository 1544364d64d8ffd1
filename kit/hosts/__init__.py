"""The machines: SSH connections, the one fan-out, environment probes and their pure parsers, data staging."""
