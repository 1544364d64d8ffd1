"""Below everything: errors, YAML with file:line:key errors, the run-directory layout, the atomic writer."""
