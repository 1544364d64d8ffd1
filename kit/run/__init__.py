"""Running benchmarks: plan -> command (the one builder) -> Runner (local, SSH) -> gather -> records."""
