"""Whether a published program's checkout is at its pin: the commit exists there, HEAD is it, the index and the work
tree match it (nothing modified, deleted, untracked, or hidden from `git status` by index flags) and the folder the
program runs from lies inside that checkout. ONE implementation: scripts/reference/launch.py records it, the kit's
pre-flight refuses with it, on this machine (state) or on a host through a POSIX shell script (shell, read_shell).

    st = state(where, top, pin)      # {"commit": ..., "clean": bool, "modified": [...], ...}
    differences(st, pin)             # [] at the pin; else what differs, one phrase each

A copy that is no checkout of its own (an unpacked archive, a sparse copy) is at the pin when the files under the
pinned paths are those of the pinned tree: `state(..., listing=read_listing(text))` compares them with the tree's
listing (scripts/reference/trees/<code>.txt, `git ls-tree -r` lines), so a changed, missing or added file names
itself, and tree_id() recomputes git's tree hash of a path from it.

`top` is the checkout's top folder: git's safe.directory names it, so a checkout another user owns is read too.
Standard library only; never imports the kit.
"""

from __future__ import annotations

import hashlib
import os

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


def state(where: str, top: str, pin: str | None = None, listing: Listing | None = None) -> dict:
    """The state of the checkout `top` that the program runs from at `where`, read on this machine; with the pinned
    tree's `listing`, a `top` that is not the top of a git work tree (an unpacked archive, maybe inside another
    checkout) is judged by its files instead (files_state)."""
    said = run_probes(where, top, pin)
    if listing is not None and not own_checkout(said, top, os.path.realpath):
        return files_state(top, listing)
    return judge(said, pin)


def own_checkout(said: dict[str, tuple[int, str]], top: str, resolve=lambda p: p.rstrip("/")) -> bool:
    """Whether git says `top` is the top of a work tree (else a copy judged by its files, given a listing)."""
    rc, found = said.get("checkout", (-1, ""))
    return rc == 0 and resolve(found.strip()) == resolve(top)


def differences(st: dict, pin: str | None, where: str = "", top: str = "") -> list[str]:
    """What keeps the checkout from being at `pin` (paths relative to its top), one phrase each; [] when at it.
    The caller names the checkout and the pin."""
    if st.get("files_of"):
        return _file_differences(st, pin)
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


# ---- a copy without git: its files against the pinned tree's listing ----------------------------------------------


class Listing(dict):
    """path -> (mode, blob id) of every file of a commit's tree under the paths a program runs (`git ls-tree -r`),
    with the commit and those paths."""

    def __init__(self, commit: str, paths: tuple[str, ...], files: dict[str, tuple[str, str]]):
        super().__init__(files)
        self.commit, self.paths = commit, paths


def read_listing(text: str) -> Listing:
    """A listing file: `# commit SHA`, `# paths P ...`, then `MODE blob SHA<TAB>PATH` lines; ValueError naming the
    line that is none of these."""
    commit, paths, files = "", (), {}
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# commit "):
            commit = line.split()[2]
        elif line.startswith("# paths "):
            paths = tuple(line.split()[2:])
        elif line and not line.startswith("#"):
            head, tab, path = line.partition("\t")
            words = head.split()
            if not tab or len(words) != 3 or words[1] != "blob" or len(words[2]) != 40:
                raise ValueError(f"line {n}: expected 'MODE blob SHA<TAB>PATH', got {line[:80]!r}")
            files[path] = (words[0], words[2])
    if not commit or not paths:
        raise ValueError("no '# commit SHA' or '# paths P ...' line")
    return Listing(commit, paths, files)


def write_listing(listing: Listing) -> str:
    lines = [f"# commit {listing.commit}", f"# paths {' '.join(listing.paths)}"]
    return "\n".join([*lines, *(f"{m} blob {i}\t{p}" for p, (m, i) in sorted(listing.items()))]) + "\n"


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def file_entry(path: str) -> tuple[str, str]:
    """(git's mode, blob id) of a file or symbolic link as git would store it."""
    if os.path.islink(path):
        return "120000", blob_id(os.fsencode(os.readlink(path)))
    with open(path, "rb") as f:
        data = f.read()
    return ("100755" if os.stat(path).st_mode & 0o100 else "100644"), blob_id(data)


def tree_id(files: dict[str, tuple[str, str]], under: str) -> str:
    """git's object id of `under` (a folder: its tree; a file: its blob) computed from a listing's entries."""
    if under in files:
        return files[under][1]
    nested: dict = {}
    for path, entry in files.items():
        if path.startswith(under.rstrip("/") + "/"):
            *folders, name = path[len(under.rstrip("/")) + 1:].split("/")
            node = nested
            for folder in folders:
                node = node.setdefault(folder + "/", {})
            node[name] = entry

    def tree(node: dict) -> str:
        body = b""
        for key in sorted(node):  # git orders a folder as its name with a slash
            value = node[key]
            if isinstance(value, dict):
                body += b"40000 " + key[:-1].encode() + b"\0" + bytes.fromhex(tree(value))
            else:
                body += value[0].encode() + b" " + key.encode() + b"\0" + bytes.fromhex(value[1])
        return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()

    if not nested:
        raise KeyError(f"{under}: no file under it in the listing")
    return tree(nested)


def files_under(top: str, paths: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """path -> (mode, blob id) of every file under each of `paths` in `top`, as git would add them; Python's own
    caches (__pycache__/*.pyc, written by any run) are not the program's."""
    found = {}
    for path in paths:
        full = os.path.join(top, path)
        if os.path.islink(full) or os.path.isfile(full):
            found[path] = file_entry(full)
            continue
        for folder, dirs, names in os.walk(full):  # a linked folder is listed as a link, never followed
            rel = os.path.relpath(folder, top).replace(os.sep, "/")
            for name in [d for d in dirs if os.path.islink(os.path.join(folder, d))] + names:
                if not (name.endswith(".pyc") and os.path.basename(folder) == "__pycache__"):
                    found[f"{rel}/{name}"] = file_entry(os.path.join(folder, name))
    return found


def files_state(top: str, listing: Listing) -> dict:
    """The state record of a copy judged by its files: the listing's commit where every file under its paths is
    the pinned tree's, else None and what differs (modified, deleted, untracked)."""
    try:
        found = files_under(top, listing.paths)
    except OSError as exc:
        return {"commit": None, "files_of": listing.commit, "clean": False, "unreadable": str(exc),
                **{k: [] for k in KINDS}}
    return files_record(listing, found)


def files_record(listing: Listing, found: dict[str, tuple[str, str]]) -> dict:
    """files_state's record from the files found (path -> (mode, blob id)), on this machine or a host."""
    kinds = {"modified": sorted(p for p in listing if p in found and found[p] != listing[p]),
             "deleted": sorted(p for p in listing if p not in found),
             "untracked": sorted(p for p in found if p not in listing), "hidden": []}
    clean = not any(kinds.values())
    return {"commit": listing.commit if clean else None, "files_of": listing.commit, "clean": clean,
            "paths": list(listing.paths), **kinds}


def _file_differences(st: dict, pin: str | None) -> list[str]:
    out = [f"cannot be read: {st['unreadable']}"] if st.get("unreadable") else []
    for kind in ("modified", "deleted", "untracked"):
        names = st.get(kind) or []
        if names:
            more = f" (+{len(names) - SHOWN} more)" if len(names) > SHOWN else ""
            out.append(f"{', '.join(names[:SHOWN])}{more} {kind}")
    if pin and st["files_of"] != pin:
        out.append(f"its files were judged against {st['files_of'][:7]}, not the pin")
    elif out:
        out.append(f"not a checkout: its files differ from the tree of the pin {st['files_of'][:7]}")
    return out


# ---- on a host: the same probes as one POSIX shell script, read back here ----------------------------------------


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\"'\"'") + "'"


# the files under TOP's PATHs as `git ls-tree -r` lists them (mode, blob id by `git hash-object`, which needs no
# repository; a link's blob is its target's text), Python's caches left out: files_under's answer, on a host
FILES_SH = r"""cd "$1" || exit 1; shift
find "$@" \( -type f -o -type l \) -print | while IFS= read -r f; do
  case "$f" in */__pycache__/*.pyc) continue;; esac
  if [ -L "$f" ]; then m=120000; h=$(printf '%s' "$(readlink "$f")" | git hash-object --stdin)
  elif [ -n "$(find "$f" -perm -u+x)" ]; then m=100755; h=$(git hash-object -- "$f")
  else m=100644; h=$(git hash-object -- "$f"); fi
  printf '%s blob %s\t%s\n' "$m" "$h" "$f"
done"""


def read_files(text: str) -> dict[str, tuple[str, str]]:
    """FILES_SH's answer -> path -> (mode, blob id); a line it did not write is left out (then judged missing)."""
    found = {}
    for line in text.splitlines():
        head, tab, path = line.partition("\t")
        words = head.split()
        if tab and len(words) == 3 and words[1] == "blob" and len(words[2]) == 40:
            found[path] = (words[0], words[2])
    return found


def judge_host(said: dict[str, tuple[int, str]], top: str, pin: str | None, listing: Listing | None) -> dict:
    """A host's answers to `shell` judged as `state` judges this machine's: by its files where `top` is no work
    tree's top and a listing is known (their probe must have answered), else by git."""
    if listing is not None and not own_checkout(said, top):
        rc, text = said.get("files", (-1, ""))
        if rc != 0:
            return {"commit": None, "files_of": listing.commit, "clean": False,
                    "unreadable": f"the host could not list its files (exit {rc})", **{k: [] for k in KINDS}}
        return files_record(listing, read_files(text))
    return judge(said, pin)


def shell(tag: str, where: str, top: str, pin: str | None = None, paths: tuple[str, ...] = ()) -> str:
    """sh lines printing each probe's output as `code<TAB>TAG<TAB>NAME<TAB>+LINE` and its exit status as
    `code<TAB>TAG<TAB>NAME<TAB>=N` (TAG: no tab or newline); `timeout` bounds each git command where it exists.
    With `paths` (a listing's), also the files under them (FILES_SH), for a copy that is no checkout."""
    lines = ["if command -v timeout >/dev/null 2>&1; then T='timeout " + str(TIMEOUT_S) + "'; else T=; fi"]
    named = probes(where, top, pin)
    if paths:
        named["files"] = ["sh", "-c", FILES_SH, "sh", top, *paths]
    for name, argv in named.items():
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


def main(argv: list[str]) -> int:
    """`code_state.py listing TOP COMMIT PATH...`: the listing file of a copy of COMMIT's PATHs at TOP (a maintainer
    who moves a pin writes scripts/reference/trees/<code>.txt with it, from a clean checkout)."""
    if len(argv) < 4 or argv[0] != "listing":
        print("usage: code_state.py listing TOP COMMIT PATH...", file=__import__("sys").stderr)
        return 2
    top, commit, paths = argv[1], argv[2], tuple(argv[3:])
    print(write_listing(Listing(commit, paths, files_under(top, paths))), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(__import__("sys").argv[1:]))
