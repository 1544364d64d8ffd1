"""Whether a published program's checkout is at its pin: the commit exists there, HEAD is it, the index and the work
tree match it (nothing modified, deleted, untracked, or hidden from `git status` by index flags) and the folder the
program runs from lies inside that checkout. ONE implementation: scripts/reference/launch.py records it, the kit's
pre-flight refuses with it, on this machine (state) or on a host through a POSIX shell script (shell, read_shell).

    st = state(where, top, pin)      # {"commit": ..., "clean": bool, "modified": [...], ...}
    differences(st, pin)             # [] at the pin; else what differs, one phrase each

`top` is the checkout's top folder: git's safe.directory names it, so a checkout another user owns is read too.
Standard library only; never imports the kit.
"""

from __future__ import annotations

TIMEOUT_S = 30  # per git command
SHOWN = 5  # names listed per kind in a message; the record keeps them all
KINDS = ("modified", "deleted", "untracked", "hidden")


def probes(where: str, top: str, pin: str | None = None) -> dict[str, list[str]]:
    """The git commands whose answers `judge` reads: name -> argv."""
    # read only: no index refresh written into a shared checkout, no fsmonitor hook of the checkout's own config
    # a sparse checkout's files outside its folders are skip-worktree ('S') and absent; git clears the flag of one
    # present again (so status sees it) unless sparse.expectFilesOutsideOfPatterns, forced off here
    git = ["git", "--no-replace-objects", "--no-optional-locks", "-c", f"safe.directory={top}", "-c",
           "core.quotePath=false", "-c", "core.fsmonitor=false", "-c", "sparse.expectFilesOutsideOfPatterns=false"]
    out = {
        "top": [*git, "-C", where, "rev-parse", "--show-toplevel"],
        "checkout": [*git, "-C", top, "rev-parse", "--show-toplevel"],
        "head": [*git, "-C", where, "rev-parse", "--verify", "-q", "HEAD"],
        "status": [*git, "-C", top, "status", "--porcelain", "--untracked-files=all"],
        "flags": [*git, "-C", top, "ls-files", "-v"],  # 'H path' unless assume-unchanged (lower case) or skip-worktree
        "sparse": [*git, "-C", top, "config", "--bool", "core.sparseCheckout"],
    }
    if pin:
        out["pin"] = [*git, "-C", top, "cat-file", "-t", pin]
    return out


def run_probes(where: str, top: str, pin: str | None = None) -> dict[str, tuple[int, str]]:
    import subprocess  # here: verify judges records with this module and starts no process

    said = {}
    for name, argv in probes(where, top, pin).items():
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
            said[name] = (done.returncode, done.stdout)
        except (OSError, subprocess.TimeoutExpired):
            said[name] = (-1, "")  # judged as git's refusal: not known clean
    return said


def judge(said: dict[str, tuple[int, str]], pin: str | None = None) -> dict:
    """The checkout's state from the probes' (exit status, stdout): the record launch.py writes."""
    ok = {name: out for name, (rc, out) in said.items() if rc == 0}
    st: dict = {"commit": ok["head"].strip() if "head" in ok else None}
    kinds: dict[str, list[str]] = {k: [] for k in KINDS}
    for line in ok.get("status", "").splitlines():
        code, path = line[:2], line[3:].split(" -> ")[-1]
        if code == "??" and "__pycache__/" in path and path.endswith(".pyc"):
            continue  # Python's own cache of a source it imports (and checks against it): written by any run
        kinds["untracked" if code == "??" else "deleted" if "D" in code else "modified"].append(path)
    sparse = ok.get("sparse", "").strip() == "true"  # bench/prepare_models.py's checkouts are
    for line in ok.get("flags", "").splitlines():
        if line[:2] != "H " and len(line) > 2 and not (sparse and line[:2] == "S "):
            kinds["hidden"].append(line[2:])
    st.update(kinds)
    if "top" in ok and "checkout" in ok and ok["top"].strip() != ok["checkout"].strip():
        st["outside"] = ok["top"].strip()  # the checkout the folder belongs to, not the pinned one
    if pin and ok.get("pin", "").strip() != "commit":
        st["pin_missing"] = True
    st["clean"] = bool(st["commit"]) and "status" in ok and "flags" in ok and "outside" not in st and not any(
        kinds.values())
    return st


def state(where: str, top: str, pin: str | None = None) -> dict:
    """The state of the checkout `top` that the program runs from at `where`, read on this machine."""
    return judge(run_probes(where, top, pin), pin)


def differences(st: dict, pin: str | None, where: str = "", top: str = "") -> list[str]:
    """What keeps the checkout from being at `pin` (paths relative to its top), one phrase each; [] when at it.
    The caller names the checkout and the pin."""
    if not st.get("commit"):
        return ["not a git checkout (or git cannot read it)"]
    out = []
    if "outside" in st:
        out.append(f"{where or 'the program folder'} belongs to the checkout {st['outside']}, not {top or 'its own'}")
    for kind in KINDS:
        names = st.get(kind) or []
        if names:
            more = f" (+{len(names) - SHOWN} more)" if len(names) > SHOWN else ""
            flag = " from git status (assume-unchanged/skip-worktree)" if kind == "hidden" else ""
            out.append(f"{', '.join(names[:SHOWN])}{more} {kind}{flag}")
    if not st.get("clean") and not out:
        out.append("git status could not be read")
    if st.get("pin_missing"):
        out.append("the pin is not in the checkout")
    if pin and st["commit"] != pin:
        out.append(f"HEAD {st['commit'][:7]} is not the pin")
    elif out:
        out.append(f"HEAD {st['commit'][:7]} is the pin")
    return out


# ---- on a host: the same probes as one POSIX shell script, read back here ----------------------------------------


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\"'\"'") + "'"


def shell(tag: str, where: str, top: str, pin: str | None = None) -> str:
    """sh lines printing each probe's output as `code<TAB>TAG<TAB>NAME<TAB>+LINE` and its exit status as
    `code<TAB>TAG<TAB>NAME<TAB>=N` (TAG: no tab or newline); `timeout` bounds each git command where it exists."""
    lines = ["if command -v timeout >/dev/null 2>&1; then T='timeout " + str(TIMEOUT_S) + "'; else T=; fi"]
    for name, argv in probes(where, top, pin).items():
        keep = " | grep -v '^H '" if name == "flags" else ""  # only flagged entries travel back
        head = f"printf 'code\\t%s\\t%s\\t' {_quote(tag)} {name}"
        lines.append(f"o=$($T {' '.join(map(_quote, argv))} 2>/dev/null); r=$?; printf '%s\\n' \"$o\"{keep} | "
                     f"while IFS= read -r l; do {head}; printf '+%s\\n' \"$l\"; done; {head}; printf '=%s\\n' \"$r\"")
    return "\n".join(lines)


def read_shell(output: str) -> dict[str, dict[str, tuple[int, str]]]:
    """`shell`'s lines in a host's output -> {tag: {probe: (exit status, stdout)}}; other lines are ignored."""
    texts: dict[str, dict[str, list[str]]] = {}
    codes: dict[str, dict[str, int]] = {}
    for line in output.splitlines():
        parts = line.split("\t", 3)
        if len(parts) != 4 or parts[0] != "code":
            continue
        _, tag, name, value = parts
        if value.startswith("+"):
            texts.setdefault(tag, {}).setdefault(name, []).append(value[1:])
        elif value.startswith("=") and value[1:].lstrip("-").isdigit():
            codes.setdefault(tag, {})[name] = int(value[1:])
    return {tag: {name: (rc, "\n".join(texts.get(tag, {}).get(name, []))) for name, rc in named.items()}
            for tag, named in codes.items()}
