"""README.md is a guide that cannot rot (issue 49): under 200 lines, `make setup` then `make test` first, the five
seeds named before any use of their numbers, and every command of its walkthroughs taken from the README's own
```console blocks and run as written, in the order written, from a working folder that holds this checkout.

A command marked `# needs a GPU`, `# needs SSH hosts`, `# needs Slurm` or `# needs your run` is not run; it must still
parse (kit's own parser, fab's task list and options), so a renamed flag shows here. `# exit N` is the exit status
the README documents for that command; every other command must exit 0. The relative links of README.md and
docs/*.md, anchors included, must point at files and headings that exist.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
VENV_BIN = REPO / ".venv" / "bin"
NEEDS = {"a GPU", "SSH hosts", "Slurm", "your run"}
MIN_RUN = 8  # runnable commands the walkthroughs must hold at least
MARK = re.compile(r"^(?:needs (?P<needs>.+)|exit (?P<exit>\d+))$")
# what the README says of a command's output, held to it (each key must match a README command's start)
SAYS = {
    "kit suites": ["gpu1", "v100"],
    "kit bench --suite gpu1 --dry-run": ["nothing is started", "totals:", "estimated time:"],
    "kit bench --suite gpu1 --select 'torch/resnet50/*' --dry-run": ["torch/resnet50/bz256/1n1g/amp-nhwc"],
    "kit standing tests/fixtures/gpu-runs/h200-20261128/dle": ["Where this run stands", "NVIDIA H200", "H100"],
    "kit cluster --suite v100 --dry-run": ["host groups:", "2-node cases: node1", "nothing is started"],
    "kit verify tests/fixtures/golden-bundles/cpu-loader": ["CONSISTENT, authenticity NOT checked"],
    "kit verify tests/fixtures/golden-bundles/cpu-loader-says-gpu": ["log_states_its_case", "NOT OK"],
    "kit verify --rules v1 tests/fixtures/golden-bundles/cpu-loader-says-gpu": ["rule set v1", "CONSISTENT"],
    "kit crosscheck kit/claims/lambda.yaml": ["596 match", "0 mismatch"],
}


@dataclass(frozen=True)
class Command:
    line: int  # in README.md
    section: str  # the ## heading above it
    text: str  # as typed, comment included
    argv: tuple[str, ...]
    needs: str | None
    exit: int

    def __str__(self) -> str:
        return f"README.md:{self.line}: $ {self.text}"


def readme_commands(text: str) -> list[Command]:
    """Every `$ ` line of every ```console block, with its marker; any other line in such a block is an error."""
    found, section, block = [], "", None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            block = None if block is not None else line[3:].strip()
            continue
        if block is None:
            if line.startswith("## "):
                section = line[3:].strip()
            continue
        if block != "console" or not line.strip():
            continue
        assert line.startswith("$ "), f"README.md:{n}: a console block holds only `$ ` commands: {line!r}"
        command = line[2:]
        body, _, comment = command.partition(" #")
        needs, status = None, 0
        mark = MARK.match(comment.strip())
        if mark and mark["needs"]:
            needs = mark["needs"].strip()
            assert needs in NEEDS, f"README.md:{n}: unknown marker 'needs {needs}' (known: {sorted(NEEDS)})"
        elif mark:
            status = int(mark["exit"])
        argv = tuple(shlex.split(body))
        assert argv, f"README.md:{n}: an empty command"
        found.append(Command(n, section, command.strip(), argv, needs, status))
    return found


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))
RUNNABLE = [c for c in COMMANDS if c.needs is None]


def test_readme_is_a_guide_under_200_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines; reference material belongs in docs/"
    walkthroughs = sorted({c.section for c in COMMANDS if c.section.startswith("Walkthrough")})
    assert [w.split(":")[0] for w in walkthroughs] == ["Walkthrough 1", "Walkthrough 2", "Walkthrough 3"]
    for walkthrough in walkthroughs:
        own = [c for c in COMMANDS if c.section == walkthrough]
        assert len(own) >= 3 and any(c.needs is None for c in own), (walkthrough, own)


def test_setup_commands_come_first():
    """CI (.ci/run) runs the README's first commands: `make setup`, then `make test`, in the first fenced block."""
    lines = README.read_text(encoding="utf-8").splitlines()
    fences = [n for n, line in enumerate(lines) if line.startswith("```")]
    start, end = fences[0], fences[1]
    assert end < 15, "the set-up commands must be in the README's first lines"
    assert [line.strip() for line in lines[start + 1:end] if line.strip()] == ["make setup", "make test"]


def test_seeds_are_named_before_their_numbers_are_used():
    text = README.read_text(encoding="utf-8")
    table = text.index("## The five published reports")
    for seed in ("000", "001", "002", "003", "004"):
        assert re.search(rf"^\| {seed} \| \w", text, re.M), f"seed {seed} is not named in the seeds' table"
    early = [m.group(0) for m in re.finditer(r"\bseeds? \d{3}", text) if m.start() < table]
    assert not early, f"seed numbers used before the table names them: {early}"


def workspace(tmp_path: Path) -> Path:
    """A working folder holding this checkout (its top-level entries linked), without the user's runs or hosts.yaml:
    what the README's commands write (hosts.yaml, runs/) lands here, never in the checkout."""
    ws = tmp_path / "checkout"
    ws.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in {"runs", "reports", "hosts.yaml", ".git"}:
            (ws / entry.name).symlink_to(entry)
    return ws


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIT_") or k in {"KIT_SHARED", "KIT_CACHE_DIR"}}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"  # what `. .venv/bin/activate` does
    env["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    return env


def test_every_runnable_command_runs_as_documented(tmp_path):
    assert len(RUNNABLE) >= MIN_RUN, f"only {len(RUNNABLE)} commands of the walkthroughs run here: {RUNNABLE}"
    unmatched = [key for key in SAYS if not any(c.text.startswith(key) for c in RUNNABLE)]
    assert not unmatched, f"the README no longer has these commands: {unmatched}"
    ws, env, failures = workspace(tmp_path), environment(), []
    for command in RUNNABLE:
        assert not re.search(r"[<>]", command.text.partition(" #")[0]), f"{command}: a placeholder in a run command"
        done = subprocess.run(["bash", "-c", command.text], cwd=ws, env=env, capture_output=True, text=True,
                              timeout=600)
        out = done.stdout + done.stderr
        if done.returncode != command.exit:
            failures.append(f"{command}\n  exit {done.returncode}, documented {command.exit}\n{out[-3000:]}")
            continue
        for key, says in SAYS.items():
            if command.text.partition(" #")[0].strip() == key:
                missing = [s for s in says if s not in out]
                if missing:
                    failures.append(f"{command}\n  output lacks {missing}\n{out[-3000:]}")
    assert not failures, "\n\n".join(failures)
    assert not (ws / "runs").exists() or all(p.name.startswith("check-env-") for p in (ws / "runs").iterdir()), \
        "a dry run made a run folder"


def _fab(*args: str) -> str:
    done = subprocess.run([str(VENV_BIN / "fab"), *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=environment())
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.needs], ids=lambda c: f"line{c.line}")
def test_marked_commands_still_parse(command):
    """What needs a GPU, hosts, Slurm or the user's run is not run here, but its subcommand and flags must exist."""
    program, *args = command.argv
    if program == "kit":
        from kit.cli.main import build_parser

        try:
            build_parser().parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"{command}: kit refuses its arguments (exit {exc.code})")
    elif program == "fab":
        if "-H" in args:  # fab's own option: the hosts
            at = args.index("-H")
            args = args[:at] + args[at + 2:]
        task, *options = args
        listed = _fab("--list")
        assert re.search(rf"^\s+{re.escape(task)}\s", listed, re.M), f"{command}: no fab task {task!r}"
        helped = _fab("--help", task)
        for option in (o.split("=")[0] for o in options if o.startswith("--")):
            assert option in helped, f"{command}: fab {task} has no option {option}"
    else:
        pytest.fail(f"{command}: a marked command this test cannot check; run it or teach the test")


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text, inside, found = path.read_text(encoding="utf-8"), False, set()
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(page):
    text = page.read_text(encoding="utf-8")
    targets = LINK.findall(text)
    broken = []
    for target in targets:
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_docs_are_linked_from_the_readme():
    linked = {Path(t.partition("#")[0]).name for t in LINK.findall(README.read_text(encoding="utf-8"))}
    orphans = [p.name for p in DOCS.glob("*.md") if p.name not in linked]
    assert not orphans, f"docs/ pages the README does not link: {orphans}"


def test_where_a_new_part_goes_is_whole():
    """The list that says where each kind of new part goes (docs/architecture.md) keeps every entry, and every file
    it names exists."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("## Where a new part goes"):]
    for part in ("a model", "a case key", "a runner", "a container runtime", "a published program", "a log format",
                 "a report format", "an audit rule"):
        assert re.search(rf"^- {part}\b", section, re.M), f"'Where a new part goes' lost '{part}'"
    named = set(re.findall(r"`((?:kit|scripts|tests|docker)/[\w/.]+\.(?:py|yaml))`", section))
    assert len(named) >= 10
    missing = sorted(p for p in named if not (REPO / p).exists() and not re.search(r"/v[A-Z]/", p))
    assert not missing, f"'Where a new part goes' names files that do not exist: {missing}"


if __name__ == "__main__":  # list what the test runs and what it leaves out
    for c in COMMANDS:
        print(f"{'run ' if c.needs is None else 'skip'} {c.line:4} {c.text}", file=sys.stdout)
