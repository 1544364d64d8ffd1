"""PURE: report.html, the report as one self-contained page beside report.md, and the summary `kit report` prints.

The page holds the headline first (where a GPU run stands against published figures, then the per-case figures),
the plots the run wrote (embedded as data: URIs), then the rest of report.md in collapsible <details>. No network:
inline CSS, no script, and a Content-Security-Policy that allows nothing but inline style and data: images. The
Markdown is rendered by markdown-it-py with raw HTML off, so a log's text is always escaped, never markup.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from markdown_it import MarkdownIt

from kit.core.files import write_text
from kit.results import stats
from kit.results.exporters import OUTPUT_NAMES, _shown, to_markdown, write_outputs
from kit.results.report import Report

HTML_NAME = "report.html"
PLOT_NAMES = tuple(OUTPUT_NAMES[k] for k in ("throughput_png", "png", "frameworks_png", "telemetry_png"))
TERMINAL_SECTIONS = ("Logs that gave no figure", "Files ignored")  # report.md's, in the summary too
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main{max-width:1400px;margin:0 auto;padding:1.5rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:1.6rem}h3{font-size:1.05rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem;display:block;overflow-x:auto}
th,td{border:1px solid #d0d0d5;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#eef0f4}
code{font-size:.85em;background:#eef0f4;padding:0 .2em;border-radius:3px;overflow-wrap:anywhere}
.headline{background:#fff;border:1px solid #d0d0d5;border-radius:6px;padding:0 1rem 1rem;margin:1rem 0}
.warning{background:#fff4d6;border-left:4px solid #e0a800;padding:.5rem .8rem}
.answer{background:#fff;border:2px solid #3b5bdb;border-radius:6px;padding:.2rem 1rem;margin:1rem 0}
.answer p{margin:.5rem 0}.note{color:#555;font-size:.9rem}
td{white-space:nowrap}td:first-child{white-space:normal}
details{background:#fff;border:1px solid #d0d0d5;border-radius:6px;margin:.6rem 0;padding:.3rem 1rem}
summary{cursor:pointer;font-weight:600;padding:.3rem 0}
figure{margin:1rem 0}img{max-width:100%;height:auto;border:1px solid #d0d0d5;background:#fff}
"""


@dataclass
class Section:
    title: str  # the h2 heading's Markdown ("" before the first)
    source: str  # its Markdown, the heading included
    html: str  # its body rendered (the heading not)
    title_html: str


def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def sections(text: str) -> list[Section]:
    """Markdown split at its top-level h2 headings (parsed, so a '## ' inside a table or code is no heading)."""
    md = _markdown()
    tokens = md.parse(text)
    lines = text.splitlines(keepends=True)
    cuts = [i for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h2" and t.level == 0]
    bounds = [0, *cuts, len(tokens)]
    out = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        part = tokens[start:end]
        if not part:
            continue
        heading = start in cuts
        first = part[0].map[0] if start and part[0].map else 0
        last = tokens[end].map[0] if end < len(tokens) and tokens[end].map else len(lines)
        inline = part[1].children or [] if heading else []
        out.append(Section(part[1].content if heading else "", "".join(lines[first:last]),
                           md.renderer.render(part[3:] if heading else part, md.options, {}),
                           md.renderer.render(inline, md.options, {})))
    return out


def figures_markdown(report: Report, out_dir: Path | None = None) -> str:
    """The per-case figures: one row per case of every group, in results.json's order; a speedup column only where
    a group has two cases or more (report layout 2). With out_dir (the page's folder), each run's log linked; a CV
    only where a case has two runs or more."""
    scaled = report.layout < 2 or any(len(g.cases) > 1 for g in report.groups)
    logs = " logs |" if out_dir is not None else ""
    rows = [f"| case | nodes | {report.devices} | median |{' speedup |' if scaled else ''} unit | runs | min | max "
            f"| CV |{logs}", "| --- " * ((10 if scaled else 9) + bool(logs)) + "|"]
    for group in report.groups:
        for case in group.cases:
            speed = ("" if case.speedup_rounded is None else f" {case.speedup_rounded} |") if scaled else ""
            cv = f"{stats.cv(case.values):.2%}" if len(case.values) > 1 else "— (1 run)"
            linked = ""
            if out_dir is not None:
                linked = " " + " ".join(f"[{i}]({_href(run.log.path, out_dir)})" for i, run in
                                        enumerate(case.runs, 1)) + " |"
            rows.append(f"| {group.key.case_key(case.name).strip('/')} | {case.nodes} | {case.gpus} "
                        f"| {_shown(case.median, report.method)} |{speed or (' |' if scaled else '')} {group.unit} "
                        f"| {len(case.runs)} "
                        f"| {_shown(min(case.values), report.method)} | {_shown(max(case.values), report.method)} "
                        f"| {cv} |{linked}")
    return "\n".join(rows) + "\n" if report.groups else "No case gave a figure.\n"


def _href(path, out_dir: Path) -> str:
    """A relative link from the page's folder to a file, each path segment escaped for a Markdown link."""
    rel = os.path.relpath(Path(path).resolve(), Path(out_dir).resolve())
    return "/".join(quote(part) for part in Path(rel).parts)


def _body(report: Report) -> list[Section]:
    """report.md without what the page shows apart (completion, standing, settings): title, method, the rest."""
    return sections(to_markdown(dataclasses.replace(report, completion=None, standing="", reproduction="",
                                                    settings="")))


def _has_table(markdown: str) -> bool:
    return any(t.type == "table_open" for t in _markdown().parse(markdown))


def terminal_summary(report: Report, out_dir: Path) -> str:
    """What `kit report` prints: title, completion, where the run stands (else the per-case figures), the logs
    that gave no figure, and where the rest is."""
    body = _body(report)
    parts = [body[0].source.split("\n", 1)[0] + "\n"]  # the title line
    blocks = report.headline()
    completion = report.completion.line() if report.completion else None
    if completion:  # first, as report.md has it
        parts.append(blocks.pop(0) + "\n")
    others = [w for w in report.warnings if w != completion]
    if others:
        parts.append("\n".join(f"- warning: {w}" for w in others) + "\n")
    parts += [block + "\n" for block in blocks]
    if not _has_table(report.standing + report.reproduction):
        parts.append("## Per-case figures\n\n" + figures_markdown(report))
    parts += [s.source.rstrip() + "\n" for s in body if s.title in TERMINAL_SECTIONS]
    parts.append(f"The whole report: {out_dir / HTML_NAME} (a page) and {out_dir / 'report.md'} "
                 "(`kit report DIR --full` prints it).\n")
    return "\n".join(parts)


def _details(title_html: str, inner: str, is_open: bool, ident: str = "") -> str:
    attrs = (f' id="{ident}"' if ident else "") + (" open" if is_open else "")
    return f"<details{attrs}><summary>{title_html}</summary>\n{inner}</details>\n"


PLOT_ALT = {"throughput.png": "each case's median throughput as a bar, whiskers from its slowest to its fastest run, "
                              "ticks at the published figures beside it",
            "scaling.png": "throughput and speedup against the number of GPUs",
            "frameworks.png": "the frameworks' medians side by side, case by case",
            "telemetry.png": "each run's GPU power, SM clock and utilisation over its measured window"}


def to_html(report: Report, plots: dict[str, bytes], out_dir: Path | None = None) -> str:
    """The page; plots: {file name: PNG bytes} of the plots the run wrote; out_dir: the page's folder (links to
    the logs relative to it)."""
    md = _markdown()
    body = _body(report)
    title, intro = (body[0].source.split("\n", 1) + [""])[:2]  # '# title', then the method line
    title_inline = md.parse(title)[1].children or []
    title_html = md.renderer.render(title_inline, md.options, {})
    title_text = "".join(t.content for t in title_inline if t.type in ("text", "code_inline"))
    out = [_page_head(title_text), f"<h1>{title_html}</h1>"]
    if report.warnings:  # above the fold: what the figures below must be read with
        out.append('<div class="warning" id="warnings">' + md.render("\n".join(f"- {w}" for w in report.warnings))
                   + "</div>")
    if report.answer:
        out.append('<section class="answer" id="answer"><h2>The answer</h2>'
                   + "".join(md.render(line) for line in report.answer) + "</section>")
    if report.completion and report.completion.line() not in report.warnings:
        out.append(f'<div class="note" id="completion">{md.render(report.completion.line())}</div>')
    out.append('<section class="headline" id="headline">')
    if report.standing:
        out.append(f'<div id="standing">{md.render(report.standing)}</div>')
    if report.reproduction:
        out.append(f'<div id="reproduction">{md.render(report.reproduction)}</div>')
    out.append(f'<h2>Per-case figures</h2><div id="figures">{md.render(figures_markdown(report, out_dir))}</div>'
               "</section>")
    if plots:
        out.append('<section id="plots"><h2>Plots</h2>')
        for name, data in plots.items():
            src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
            alt = f"{name}: {PLOT_ALT[name]}" if name in PLOT_ALT else name
            out.append(f'<figure><img src="{src}" alt="{html.escape(alt)}"><figcaption>{html.escape(alt)}'
                       "</figcaption></figure>")
        out.append("</section>")
    out.append(_details("Settings and environment", md.render(report.settings) + md.render(intro),
                        False, "settings"))
    groups = {g.key.label() for g in report.groups}
    for n, section in enumerate(body[1:], 1):
        out.append(_details(section.title_html, section.html, section.title not in groups, f"section-{n}"))
    out.append("</main></body></html>\n")
    return "\n".join(out)


def _page_head(title: str) -> str:
    """Every page's head, up to its <main>: the policy that allows nothing but inline style and data: images."""
    return "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                      f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
                      '<meta name="viewport" content="width=device-width, initial-scale=1">',
                      f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body><main>"])


def markdown_page(text: str) -> str:
    """A self-contained page of a Markdown text (a sweep's report.md), its first line's '# title' its title."""
    title = text.split("\n", 1)[0].lstrip("# ").strip()
    return "\n".join([_page_head(title), _markdown().render(text), "</main></body></html>\n"])


def write_html(report: Report, out_dir: Path, written: list[Path]) -> Path:
    """report.html into out_dir, with the plots among the files just written."""
    plots = {p.name: p.read_bytes() for p in written if p.name in PLOT_NAMES}
    return write_text(Path(out_dir) / HTML_NAME, to_html(report, plots, out_dir))


def write_report_files(report: Report, out_dir: Path, plots: bool = True) -> list[Path]:
    """Every file of a report (kit.results.exporters.write_outputs), then report.html beside them."""
    written = write_outputs(report, out_dir, plots)
    return [*written, write_html(report, out_dir, written)]
