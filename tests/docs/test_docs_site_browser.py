"""The built site in a real browser: Debian's Chromium driven by Playwright (the browser
downloads of ``playwright install`` are not reachable here, so ``executable_path`` points at
/usr/bin/chromium).  The site is served on 127.0.0.1 by Python's http.server.

Every HTML page loads (200, no console error, no failed request); every internal link
resolves, ``#anchor`` included; the search box finds the ``convert`` command; the API page
shows ``polybag.open``'s signature.  Without /usr/bin/chromium the tests skip, except in CI
(``CI`` set), where they fail."""

from __future__ import annotations

import functools
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urlsplit

import pytest
from docs_site import Site
from run_examples import unavailable

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: how long one page may take to load (a loaded machine; not a speed check)
LOAD_TIMEOUT_MS = 60_000


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


@pytest.fixture(scope="module")
def site_url(built_site: Site) -> Iterator[str]:
    """The built site served on a free port of 127.0.0.1."""
    assert built_site.returncode == 0, built_site.log[-5000:]
    handler = functools.partial(_QuietHandler, directory=str(built_site.html))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.is_file():
        unavailable(f"no {CHROMIUM} (Debian's chromium package; scripts/test.sh installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (part of polybag's test extra)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@dataclass
class Crawl:
    """What loading every page of the site saw."""

    pages: list[str] = field(default_factory=list)  # paths relative to the site, e.g. "api/reading.html"
    problems: list[str] = field(default_factory=list)  # load errors, console errors, failed requests
    links: dict[str, set[str]] = field(default_factory=dict)  # page -> internal hrefs (absolute URLs)
    ids: dict[str, set[str]] = field(default_factory=dict)  # page -> element ids and anchor names
    seconds: float = 0.0


@pytest.fixture(scope="module")
def crawl(browser: Any, site_url: str, built_site: Site) -> Crawl:
    """Load every HTML page of the built site in one browser context."""
    t0 = time.monotonic()
    result = Crawl()
    result.pages = sorted(p.relative_to(built_site.html).as_posix() for p in built_site.html.rglob("*.html"))
    context = browser.new_context()
    page = context.new_page()
    current: list[str] = [""]
    page.on("console", lambda m: m.type == "error" and result.problems.append(f"{current[0]}: console error: {m.text}"))
    page.on("pageerror", lambda e: result.problems.append(f"{current[0]}: page error: {e}"))
    page.on("requestfailed", lambda r: result.problems.append(f"{current[0]}: request failed: {r.url} ({r.failure})"))
    page.on(
        "response",
        lambda r: r.status >= 400 and result.problems.append(f"{current[0]}: {r.status} for {r.url}"),
    )
    try:
        for rel in result.pages:
            current[0] = rel
            response = page.goto(site_url + rel, wait_until="load", timeout=LOAD_TIMEOUT_MS)
            if response is None or response.status != 200:
                result.problems.append(f"{rel}: status {None if response is None else response.status}")
                continue
            hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
            result.links[rel] = {h for h in hrefs if h.startswith(site_url)}
            result.ids[rel] = set(page.eval_on_selector_all("[id], a[name]", "els => els.map(e => e.id || e.name)"))
    finally:
        context.close()
    result.seconds = time.monotonic() - t0
    return result


def test_every_page_loads_cleanly(crawl: Crawl, record_property: pytest.RecordProperty) -> None:
    record_property("docs_summary", f"docs browser crawl: {len(crawl.pages)} pages in {crawl.seconds:.1f} s")
    assert "index.html" in crawl.pages and "api/reading.html" in crawl.pages
    assert len(crawl.links) == len(crawl.pages), crawl.problems
    assert not crawl.problems, "\n".join(crawl.problems)


def test_every_internal_link_resolves(crawl: Crawl) -> None:
    broken = []
    checked = 0
    for rel, hrefs in sorted(crawl.links.items()):
        for href in sorted(hrefs):
            url, anchor = urldefrag(href)
            path = unquote(urlsplit(url).path).lstrip("/")
            if path == "" or path.endswith("/"):
                path += "index.html"
            checked += 1
            if path.endswith(".html"):
                if path not in crawl.ids:
                    broken.append(f"{rel}: link to a missing page: {href}")
                elif anchor and unquote(anchor) not in crawl.ids[path]:
                    broken.append(f"{rel}: no id {anchor!r} on {path}: {href}")
            else:  # another file of the site (an image, a download): fetched
                try:
                    with urllib.request.urlopen(url, timeout=60) as response:
                        status = response.status
                except urllib.error.HTTPError as e:
                    status = e.code
                if status != 200:
                    broken.append(f"{rel}: status {status} for {href}")
    assert checked > len(crawl.pages), "too few links found: the crawl is broken"
    assert not broken, "\n".join(broken)


def test_search_finds_the_convert_command(browser: Any, site_url: str) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(site_url + "index.html", wait_until="load", timeout=LOAD_TIMEOUT_MS)
        box = page.locator("input.sidebar-search").first
        box.fill("convert")
        box.press("Enter")
        page.wait_for_url("**/search.html?q=convert*", timeout=LOAD_TIMEOUT_MS)
        hit = page.locator('#search-results a[href*="commands/convert.html"]').first
        hit.wait_for(state="visible", timeout=LOAD_TIMEOUT_MS)
        assert "convert" in hit.inner_text().lower()
    finally:
        context.close()


def test_api_page_shows_the_open_signature(browser: Any, site_url: str) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(site_url + "api/reading.html", wait_until="load", timeout=LOAD_TIMEOUT_MS)
        signature = page.locator('dt[id="polybag.open"]')
        signature.wait_for(state="visible", timeout=LOAD_TIMEOUT_MS)
        text = " ".join(signature.inner_text().split())
        assert text.startswith("polybag.open(") and "target" in text and "tolerant" in text, text
        assert page.locator('dt[id="polybag.Reader.messages"]').is_visible()
    finally:
        context.close()

