"""cuDNN parity of the frameworks one report compares (seed 003: a cuDNN minor version apart, 7.0.2 against 7.1.4,
moved ResNet50 by more than 5 %, so frameworks compared must share it).

    cudnn_of(suite)            -> {framework: (image key, pinned cuDNN or None)} of the images its cases run in
    parity_warning(versions)   -> one line naming every version when the minors differ, else None
"""

from __future__ import annotations

from kit.config.cases import Suite


def cudnn_of(suite: Suite) -> dict[str, tuple[str, str | None]]:
    """The pinned cuDNN of each framework's image for this suite (docker/pins.yaml); empty for CPU suites."""
    from kit.images.spec import current_pins

    if suite.hardware != "gpu":
        return {}
    pins, found = current_pins(), {}
    for case in suite.cases:  # each case's image: its `image:`, else its framework's of the suite's generation
        try:
            spec = pins.for_case(case.framework, suite.hardware, suite.name, case.image)
        except KeyError:  # no image of this generation: nothing pinned to compare
            continue
        found.setdefault(case.framework, {})[spec.key] = spec.versions.get("cudnn")
    out = {}
    for framework, images in sorted(found.items()):
        for key, cudnn in sorted(images.items()):  # a framework in two images is named with each
            out[framework if len(images) == 1 else f"{framework} ({key})"] = (key, cudnn)
    return out


def program_stacks(suite: Suite, case_keys: set[str]) -> list[str]:
    """'ngc-pytorch (image torch/seed001): CUDA 11.0, cuDNN 8.0' for each published program's case that ran: what
    the accelerators ran under, from the image pins (the programs print no such line of their own)."""
    from kit.images.spec import current_pins

    if suite.hardware != "gpu":
        return []
    pins, lines = current_pins(), set()
    for case in suite.cases:
        if case.impl != "reference" or case.key not in case_keys:
            continue
        try:
            spec = pins.for_case(case.framework, suite.hardware, suite.name, case.image)
        except KeyError:
            continue
        lines.add(f"{case.log_framework} (image {spec.key}): CUDA {spec.versions.get('cuda') or 'not pinned'}, "
                  f"cuDNN {spec.versions.get('cudnn') or 'not pinned'}")
    return sorted(lines)


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def parity_warning(versions: dict[str, tuple[str, str | None]]) -> str | None:
    """A warning when the frameworks' cuDNN minor versions differ; unknown (null) pins are named, not compared."""
    known = {fw: v for fw, (_key, v) in versions.items() if v}
    if len({minor(v) for v in known.values()}) <= 1:
        return None
    listed = ", ".join(f"{fw} {v} ({versions[fw][0]})" for fw, v in sorted(known.items()))
    unknown = sorted(fw for fw, (_key, v) in versions.items() if not v)
    tail = f"; not pinned: {', '.join(unknown)}" if unknown else ""
    return (f"cuDNN differs across the frameworks compared: {listed}{tail}. Seed 003: a cuDNN minor version "
            "moved ResNet50 by more than 5 %; compare frameworks on the same cuDNN minor")
