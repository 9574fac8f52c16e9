"""The HTML report: self-contained, and really rendered in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest

from tests.helpers import hoptrace, skip_or_fail
from tests.synthetic import SEED_MS, chain_trace, to_otlp_json
from tracer.analysis.render.svg import CHART_WIDTH, STAGE_COLOURS

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
JAEGER = "http://jaeger.example:16686"
CHROMIUM = os.environ.get("HOPTRACE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    """40 seed-chain traces with model_ttft marks; inference and auth vary."""
    path = tmp_path_factory.mktemp("report") / "seed.jsonl"
    lines = []
    for i in range(40):
        ms = {**SEED_MS, "inference": 800.0 + 10 * i, "auth": 60.0 + (i % 7) * 20}
        spans = chain_trace(
            f"{i + 1:032x}", T0 + i * 5000 * MS, ms, model_ttft_ms=150.0, tokens=(700, 120)
        )
        lines.append(orjson.dumps(to_otlp_json(spans)))
    path.write_bytes(b"\n".join(lines))
    return path


@pytest.fixture(scope="module")
def report(traces, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report.html"
    done = hoptrace(
        "report",
        str(traces),
        "-o",
        str(out),
        "--stage",
        "inference",
        "--speedup",
        "100",
        "--jaeger-url",
        JAEGER,
    )
    assert done.returncode == 0, done.stderr
    return out


class _Refs(HTMLParser):
    """Every URL-bearing attribute, by tag, and whether a script or import appears."""

    URL_ATTRS = {"src", "href", "srcset", "action", "poster", "data", "formaction", "xlink:href"}

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for name, value in attrs:
            if name in self.URL_ATTRS and value is not None:
                self.refs.append((tag, name, value))


def test_report_has_no_external_fetches(report):
    html = report.read_text()
    parser = _Refs()
    parser.feed(html)
    assert "script" not in parser.tags and "iframe" not in parser.tags
    assert "@import" not in html and not re.search(r"url\((?!#)", html)
    fetched = [(t, n, v) for t, n, v in parser.refs if t != "a"]
    # The only non-link reference is the empty inline favicon (it stops the browser
    # asking the server for /favicon.ico).
    assert fetched == [("link", "href", "data:,")]
    links = [v for t, n, v in parser.refs if t == "a"]
    assert links and all(v.startswith(JAEGER + "/trace/") for v in links)
    assert "default-src 'none'" in html  # the browser enforces it too


def test_report_content_matches_the_analysis(report, traces):
    html = report.read_text()
    analyzed = orjson.loads(hoptrace("analyze", str(traces), "--format", "json").stdout)
    p50, p90 = analyzed["exemplars"]["p50"], analyzed["exemplars"]["p90"]
    assert f'href="{JAEGER}/trace/{p50}"' in html
    assert f'href="{JAEGER}/trace/{p90}"' in html
    for group in analyzed["groups"]:
        assert f"{group['share'] * 100:.1f}%" in html
    # The what-if headline of the seed story.
    assert "inference 100x faster -&gt; end-to-end" in html


def test_html_format_on_analyze_whatif_compare(traces, tmp_path):
    for command, extra in (
        ("analyze", []),
        ("whatif", ["--stage", "inference", "--speedup", "10"]),
        ("compare", [str(traces)]),
    ):
        out = tmp_path / f"{command}.html"
        done = hoptrace(command, str(traces), *extra, "--format", "html", "-o", str(out))
        assert done.returncode == 0, done.stderr
        html = out.read_text()
        assert html.startswith("<!DOCTYPE html>")
        assert 'id="share-bars"' in html and 'id="waterfall-0"' in html
    assert 'id="whatif"' in (tmp_path / "whatif.html").read_text()
    assert 'id="compare"' in (tmp_path / "compare.html").read_text()


def _browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        skip_or_fail(f"no Chromium at {CHROMIUM}: .ci/install-browser installs Debian's chromium")
    return sync_playwright()


def _open(p, url: str, width: int = 1400):
    """A page that records every request and lets none but ``url`` through."""
    browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
    page = browser.new_page(viewport={"width": width, "height": 1000})
    requests: list[str] = []
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))

    def gate(route):
        requests.append(route.request.url)
        if route.request.url == url:
            route.continue_()
        else:
            route.abort()

    page.route("**/*", gate)
    page.goto(url)
    page.wait_for_load_state("load")
    return browser, page, requests, console


def _colour_pixels(png: Path, colour: str, tolerance: int = 6) -> int:
    from PIL import Image

    want = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    img = Image.open(png).convert("RGB")
    return sum(
        n
        for n, px in img.getcolors(maxcolors=1 << 20) or []
        if all(abs(a - b) <= tolerance for a, b in zip(px, want, strict=True))
    )


@pytest.mark.integration
def test_report_renders_in_headless_chromium(report, tmp_path):
    url = report.resolve().as_uri()
    with _browser() as p:
        browser, page, requests, console = _open(p, url)
        try:
            # Nothing but the page itself was requested; no CSP violation either.
            assert requests == [url]
            assert not [m for m in console if "Content Security Policy" in m]
            shots = {}
            for element in (
                "#share-bars",
                "#whatif-bars",
                "#waterfall-0",
                "#waterfall-1",
                "#waterfall-100",
            ):
                locator = page.locator(element)
                assert locator.is_visible(), element
                box = locator.bounding_box()
                # drawn at their own width on a wide window
                assert box and box["width"] == CHART_WIDTH and box["height"] >= 60, (element, box)
                shots[element] = tmp_path / f"{element[1:]}.png"
                locator.screenshot(path=str(shots[element]))
            page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
            assert page.locator("table#groups tr").count() >= 9  # header + 8 groups
        finally:
            browser.close()
    # The charts really show the stages: every seed stage's colour is painted.
    for stage in ("inference", "network", "auth", "context", "gateway"):
        assert _colour_pixels(shots["#share-bars"], STAGE_COLOURS[stage]) > 300, stage
    # The waterfall draws spans in their stage colours and the network gaps in grey.
    for stage in ("client", "gateway", "inference", "network"):
        assert _colour_pixels(shots["#waterfall-0"], STAGE_COLOURS[stage]) > 100, stage
    # Both waterfalls are drawn to the same width; the P90 exemplar has the longer
    # inference (1,190 of 1,790 ms against about 1,000 of 1,600), so more of it is red.
    narrow = _colour_pixels(shots["#waterfall-0"], STAGE_COLOURS["inference"])
    wide = _colour_pixels(shots["#waterfall-1"], STAGE_COLOURS["inference"])
    assert wide > narrow * 1.03
    # The projected waterfall (inference 100x faster) is drawn at the P50 exemplar's
    # scale: its inference bar is a sliver, so far less of it is red.
    projected = _colour_pixels(shots["#waterfall-100"], STAGE_COLOURS["inference"])
    assert projected < narrow / 5


@pytest.mark.integration
def test_report_fits_an_800_px_window_with_nothing_clipped(report):
    """At 800 px the charts scale down with the page: every chart and its right-hand
    caption lie inside the window, the page does not scroll sideways, and the charts'
    text stays at 10 px or more."""
    url = report.resolve().as_uri()
    with _browser() as p:
        browser, page, _requests, _console = _open(p, url, width=800)
        try:
            assert page.evaluate("document.documentElement.scrollWidth") <= 800
            for element in ("#share-bars", "#whatif-bars", "#waterfall-0", "#waterfall-100"):
                box = page.locator(element).bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= 800, (element, box)
            # The longest caption ("40 traces, P50 ... ms") ends inside its chart.
            ends = page.evaluate(
                """() => {
                  const svg = document.querySelector('#share-bars');
                  const right = svg.getBoundingClientRect().right;
                  return [...svg.querySelectorAll('text')].map(t => right - t.getBoundingClientRect().right);
                }"""
            )
            assert min(ends) >= 0, ends
            # The charts' 12 px text stays readable, near the legends' 12 px.
            for element in ("#share-bars", "#waterfall-0"):
                width = page.locator(element).bounding_box()["width"]
                assert 12 * width / CHART_WIDTH >= 10, (element, width)
        finally:
            browser.close()


@pytest.mark.integration
def test_the_request_gate_would_catch_an_external_fetch(report, tmp_path):
    """Control: the same harness sees a fetch when one is slipped into the page."""
    html = report.read_text()
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    leaky = tmp_path / "leaky.html"
    leaky.write_text(html.replace("<main>", '<main><img src="http://cdn.example.test/x.png">'))
    url = leaky.resolve().as_uri()
    with _browser() as p:
        browser, _page, requests, _console = _open(p, url)
        browser.close()
    assert "http://cdn.example.test/x.png" in requests
