"""report.html: one self-contained page beside report.md (kit.results.html), opened in headless Chromium through
Selenium: the headline first, its figures equal to results.json's, every image loaded, no console error, the long
sections collapsible; a log's text never becomes markup; `kit bundle` leaves the page out, so verify judges what it
always judged. Missing Chromium fails these tests (scripts/install_system_deps.sh installs it), never skips."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from kitlogs import recorded_clean, without_the_nan_repeat
from test_gpu_telemetry_report import cut_nvml, cut_smi, span
from test_plots import png_size

from kit.audit import bundle as bd
from kit.audit.verify import verify, verify_tree
from kit.cli import main
from kit.core.layout import case_key, telemetry_name
from kit.results.extract import Method
from kit.results.html import HTML_NAME, PLOT_ALT, sections, to_html
from kit.results.report import build_report

VISIT = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128"
BUSY = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261204-yardstick" / "busy" / "runs.tar.gz"
HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def sampled(tmp_path_factory) -> Path:
    """The real H200 DLE run with its telemetry samples cut from the visit's recording (as tests/test_standing.py),
    reported by `kit report`: a standing block, a telemetry plot and per-run tables."""
    run_dir = tmp_path_factory.mktemp("html") / "run"
    shutil.copytree(VISIT / "dle", run_dir)
    recorded_clean(run_dir)
    without_the_nan_repeat(run_dir)
    for log in sorted((run_dir / "logs").rglob("*.log")):
        (cut_smi if "ngc-pytorch" in log.parts else cut_nvml)(*span(log), log.with_name(telemetry_name(log.name)))
    assert main(["report", str(run_dir)]) == 0
    return run_dir


@pytest.fixture(scope="module")
def browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.fail("headless Chromium unavailable: need the Debian packages chromium and chromium-driver "
                    "(sudo scripts/install_system_deps.sh)", pytrace=False)
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
    except ImportError as exc:
        pytest.fail(f"selenium unavailable ({exc}): make setup installs it from requirements.lock", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,2000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        chrome = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))
    except WebDriverException as exc:
        pytest.fail(f"headless Chromium did not start ({chromium}, {driver}): {exc.msg}", pytrace=False)
    try:
        yield chrome
    finally:
        chrome.quit()


def open_page(browser, path: Path) -> list[dict]:
    """The page loaded; the console's entries since the last page."""
    browser.get_log("browser")  # drop what came before
    browser.get(path.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    return browser.get_log("browser")


def test_kit_report_writes_the_page_and_prints_a_summary(sampled, capsys):
    assert main(["report", str(sampled)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# gpu-proof-dle-less-nan benchmark: run\n\n## Where this run stands against published figures")
    assert "| torch/resnet50/bz256/1n1g/amp-nhwc | 5749.1 images/s |" in out
    assert "## ngc-pytorch · resnet50" not in out and "Host: vm" not in out, "the rest is in the files"
    assert out.rstrip().endswith(f"{sampled / HTML_NAME} (a page) and {sampled / 'report.md'} "
                                 "(`kit report DIR --full` prints it).")
    assert main(["report", str(sampled), "--full"]) == 0
    assert capsys.readouterr().out == (sampled / "report.md").read_text()
    page = (sampled / HTML_NAME).read_text()
    assert "<script" not in page and 'src="http' not in page, "self-contained: no script, nothing fetched"
    # the answer first, each published figure's raw log linked where it is published, each run's log beside it
    answer = page[page.index('<section class="answer"'):page.index("</section>")]
    assert '(<a href="https://github.com/mlcommons/training_results_v4.0/blob/6fe9543/NVIDIA/results/' \
           'h200_ngc24.04_mxnet/resnet/result_0.txt">its log</a>)' in answer
    assert "<strong>on par</strong>: 0.99x the published program ngc-pytorch/resnet50/bz256/1n1g/amp, this run" in answer
    assert '<a href="logs/torch/resnet50/bz256/1n1g/resnet50_b256_amp-nhwc_1.log">1</a>' in page


def test_the_page_in_chromium(sampled, browser):
    from selenium.webdriver.common.by import By

    console = open_page(browser, sampled / HTML_NAME)
    assert [e for e in console if e["level"] in ("SEVERE", "WARNING")] == []
    # the headline first: where the run stands, then the per-case figures, before any collapsible section
    heads = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "h2")]
    assert heads[:3] == ["The answer", "Where this run stands against published figures", "Per-case figures"]
    assert browser.execute_script(
        "const h = document.getElementById('headline'), d = document.querySelector('details');"
        "return !!(h.compareDocumentPosition(d) & Node.DOCUMENT_POSITION_FOLLOWING)")
    results = json.loads((sampled / "results.json").read_text())
    medians = {case_key(g["framework"], g["model"], g["batch_per_device"], c["case"], g["precision"]):
               (c["median"], c["gpus"]) for g in results["groups"] for c in g["cases"]}
    shown = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "#figures tbody tr"):
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        shown[cells[0]] = cells[3]
    assert shown == {k: f"{m:.2f}" for k, (m, _) in medians.items()} and len(shown) == 2
    standing = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "#standing tbody tr"):
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        standing[cells[0]] = cells[1].split()[0]
    assert standing == {k: f"{m / gpus:.1f}" for k, (m, gpus) in medians.items()}
    # every image embedded and loaded (the plots the run wrote: each case's throughput, its telemetry), at the
    # PNG's own pixel size
    images = browser.execute_script("return Array.from(document.images).map(i => [i.alt, i.complete, "
                                    "i.naturalWidth, i.naturalHeight, i.src.slice(0, 22)])")
    assert images == [[f"{name}: {PLOT_ALT[name]}", True, *png_size(sampled / name), "data:image/png;base64,"]
                      for name in ("throughput.png", "telemetry.png")]
    assert images[0][2] == 1200
    # the long sections collapsed: settings, each group's per-run and telemetry tables
    details = {d.find_element(By.TAG_NAME, "summary").text: d for d in browser.find_elements(By.TAG_NAME, "details")}
    assert list(details) == ["Settings and environment", "ngc-pytorch · resnet50 · batch 256 · amp",
                             "torch · resnet50 · batch 256 · amp-nhwc"]
    assert not any(d.get_attribute("open") for d in details.values())
    telemetry = details["torch · resnet50 · batch 256 · amp-nhwc"]
    assert "power" in telemetry.get_attribute("textContent") and not telemetry.find_element(
        By.TAG_NAME, "table").is_displayed()
    telemetry.find_element(By.TAG_NAME, "summary").click()
    assert telemetry.get_attribute("open") is not None and telemetry.find_element(By.TAG_NAME, "table").is_displayed()
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_a_dlperf_tree_page_with_its_scaling_plot(published, tmp_path, browser):
    assert main(["report", str(published / "dlperf-tf2-resnet50"), "--skip", "1", "--count", "5", "--round", "2",
                 "--out", str(tmp_path)]) == 0
    console = open_page(browser, tmp_path / HTML_NAME)
    assert [e for e in console if e["level"] == "SEVERE"] == []
    images = browser.execute_script("return Array.from(document.images).map(i => [i.alt, i.naturalWidth])")
    assert images == [[f"{name}: {PLOT_ALT[name]}", png_size(tmp_path / name)[0]]
                      for name in ("throughput.png", "scaling.png")]
    medians = [c["median"] for g in json.loads((tmp_path / "results.json").read_text())["groups"]
               for c in g["cases"]]
    cells = browser.execute_script("return Array.from(document.querySelectorAll('#figures tbody tr'))"
                                   ".map(r => r.cells[3].textContent)")
    assert [float(c) for c in cells] == medians and cells[-1] == "9418.44"  # --round 2: as report.md shows them


def _hostile_report(tmp_path: Path):
    tree = tmp_path / "tree" / "1n1g"
    tree.mkdir(parents=True)
    (tree / "rn50_b128_fp32_1.log").write_text(HOSTILE + "\n")  # no figure: its reason names the file only
    report = build_report(tmp_path / "tree", Method())
    report.title = f"Report {HOSTILE}"
    report.settings = f"Host: `{HOSTILE}` and {HOSTILE}\n\n| a | b |\n| --- | --- |\n| {HOSTILE} | x |\n"
    report.standing = f"## Where this run stands\n\n- {HOSTILE}: [link](javascript:alert(2))\n"
    report.failures = [(tmp_path / "tree" / "1n1g" / f"{HOSTILE}.log", f"no figure: {HOSTILE}")]
    return report


def test_a_logs_text_never_becomes_markup(tmp_path, browser):
    page = to_html(_hostile_report(tmp_path), {})
    lowered = page.lower()
    assert "<script" not in lowered and "<img" not in lowered and "javascript:" not in lowered.replace(
        "[link](javascript:alert(2))", "")
    assert page.count("&lt;script&gt;alert(") >= 6  # title, heading, settings (3), standing, failures
    path = tmp_path / HTML_NAME
    path.write_text(page)
    console = open_page(browser, path)
    assert [e for e in console if e["level"] == "SEVERE"] == []
    assert browser.execute_script("return document.scripts.length + document.images.length") == 0
    assert browser.title == f"Report {HOSTILE}"
    text = browser.execute_script("return document.body.textContent")
    assert text.count("<script>alert('x')</script>") >= 5


def test_sections_split_at_real_headings_only():
    text = "# T\n\nintro\n\n## A\n\n| x |\n| --- |\n| ## not a heading |\n\n```\n## nor this\n```\n\n## B\n\nend\n"
    got = sections(text)
    assert [s.title for s in got] == ["", "A", "B"]
    assert "".join(s.source for s in got) == text
    assert "## not a heading" in got[1].html and "<h2>" not in got[1].html


def test_bundles_leave_the_page_out_and_verify_as_before(sampled, tmp_path):
    """report.html is a rendering of files the bundle holds: kit bundle leaves it out (an auditor renders it with
    `kit report`), so a run with the page bundles and verifies exactly as one without it; a page added to a bundle
    afterwards is a file the manifest does not list."""
    with_page = bd.make_bundle(sampled, tmp_path / "with.tgz", submitter="t", system_name="t")
    page = (sampled / HTML_NAME).read_bytes()
    (sampled / HTML_NAME).unlink()
    try:
        without = bd.make_bundle(sampled, tmp_path / "without.tgz", submitter="t", system_name="t")
    finally:
        (sampled / HTML_NAME).write_bytes(page)
    names = {}
    for which in (with_page, without):
        with tarfile.open(which) as tar:
            names[which] = sorted(m.name for m in tar.getmembers())
    assert names[with_page] == names[without] and not any(n.endswith(HTML_NAME) for n in names[with_page])
    a, b = verify(with_page), verify(without)
    assert a.ok and b.ok and a.files == b.files and [v.to_dict() for v in a.violations] == []
    unpacked = bd.unpack(with_page, tmp_path / "unpacked")
    (next((unpacked / "run").iterdir()) / HTML_NAME).write_bytes(page)
    assert [(v.rule, v.message) for v in verify_tree(unpacked).integrity] == [
        ("integrity", "not listed in manifest.json (added after bundling)")]


def test_the_console_check_sees_what_the_page_blocks(tmp_path, browser):
    """The checks above are not vacuous: an image from outside the page is refused by its policy (no network), and
    the refusal is a console error whose image never loads."""
    page = to_html(_hostile_report(tmp_path), {}).replace("</main>", '<img alt="out" src="http://127.0.0.1:9/x.png">'
                                                                       "</main>")
    path = tmp_path / HTML_NAME
    path.write_text(page)
    console = open_page(browser, path)
    assert any(e["level"] == "SEVERE" and "Content Security Policy" in e["message"] for e in console), console
    assert browser.execute_script("return document.images[0].naturalWidth") == 0


def test_the_page_of_a_busy_gpu_says_so_above_the_fold_and_answers_first(tmp_path, browser):
    """The H200 visit's run beside another process's GEMMs (tests/fixtures/gpu-runs/h200-20261204-yardstick/busy),
    with the GPU's yardstick kept in its run directory: the page opens on the warnings (host busy, the GPU held by
    another process), then the answer (the hardware suspect, the first cause), both before any folded section and
    within the first screen; the plots carry alt text."""
    from selenium.webdriver.common.by import By

    with tarfile.open(BUSY) as tar:
        tar.extractall(tmp_path, filter="data")
    (run,) = (tmp_path / "runs-busy").iterdir()
    shutil.copy(tmp_path / "yardstick-busy" / "yardstick" / "vm" / "20261204T180112Z.json",
                run / "env" / "vm" / "yardstick.json")
    assert main(["report", str(run)]) == 0
    open_page(browser, run / HTML_NAME)
    warnings = browser.find_element(By.ID, "warnings")
    assert "2 of 2 runs: host busy: load 1.4 on 16 cores during this run (GPUs held by other processes: vm: GPU0 " \
           "runs pid 1082 python3 (874 MiB))" in warnings.text
    answer = browser.find_element(By.ID, "answer")
    assert answer.text.splitlines()[1].startswith("Hardware: GPU NVIDIA H200: hardware suspect -- GEMM")
    assert "Top cause: the hardware itself (kit yardstick, above)" in answer.text
    first = browser.find_element(By.TAG_NAME, "details")
    assert warnings.location["y"] < answer.location["y"] < first.location["y"]
    assert answer.location["y"] + answer.size["height"] < 2000, "the answer within the first screen"
    assert all(": " in img.get_attribute("alt") for img in browser.find_elements(By.TAG_NAME, "img"))
