"""Pinned images: pins.yaml -> Dockerfiles (spec, pure), build, deliver to hosts and verify."""
