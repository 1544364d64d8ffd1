"""What the user declares: hosts.yaml, suites, the published programs a suite may name, kit-wide settings."""
