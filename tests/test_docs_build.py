"""The documentation builds offline with warnings as errors (the command in README.md), and the
built site is one a reader can use without a network: no page asks for a remote script,
stylesheet, font or image; formulas render in Chromium from the site's own MathJax; every guide
page shows what its examples print and a figure its own code drew (``docs/_ext``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: The guide pages: each shows at least one output and one figure of its own code.
GUIDE_PAGES = ["getting-started", *sorted(p.stem for p in (ROOT / "docs" / "guide").glob("*.md")
                                          if p.stem != "index")]
#: A reference that leaves the site: an absolute URL with a scheme, or protocol-relative.
_REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
#: ``url(...)`` and ``@import "..."`` in a stylesheet.
_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)|@import\s+['"]([^'"]+)""", re.IGNORECASE)
#: What a tag fetches when the page loads (``<a href>`` only links, and is not here).
_FETCHED = {"script": ("src",), "link": ("href",), "img": ("src", "srcset"),
            "iframe": ("src",), "source": ("src", "srcset"), "video": ("src", "poster"),
            "audio": ("src",), "embed": ("src",), "object": ("data",), "track": ("src",),
            "input": ("src",)}


#: one worker builds the site (a module fixture is built once per xdist worker: about a minute)
pytestmark = pytest.mark.xdist_group("docs-site")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built as README.md says (``-W --keep-going``), into a fresh folder."""
    pytest.importorskip("sphinx", reason="the [docs] extra is not installed")
    pytest.importorskip("myst_parser", reason="the [docs] extra is not installed")
    pytest.importorskip("pydata_sphinx_theme", reason="the [docs] extra is not installed")
    out = tmp_path_factory.mktemp("docs")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out / "doctrees"), str(ROOT / "docs"), str(out / "html")],
        capture_output=True, text=True, timeout=900, check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out / "html"


class _Page(HTMLParser):
    """What a page fetches (tag, attribute, value), its inline styles, and the classes of
    its ``div`` elements with the images inside each."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[tuple[str, str, str]] = []
        self.styles: list[str] = []
        self.divs: list[str] = []
        self.images: dict[str, list[str]] = {}
        self._in_style = False
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        for attr in _FETCHED.get(tag, ()):
            if values.get(attr):
                self.fetched.append((tag, attr, values[attr]))
        if "style" in values:
            self.styles.append(values["style"])
        self._in_style = tag == "style"
        if tag == "div":
            classes = values.get("class", "")
            self.divs.append(classes)
            self._open.append(classes)
        if tag == "img":
            for classes in self._open:
                self.images.setdefault(classes, []).append(values.get("src", ""))

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False
        if tag == "div" and self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def _parse(page: Path) -> _Page:
    parsed = _Page()
    parsed.feed(page.read_text(encoding="utf-8"))
    return parsed


def remote_assets(site: Path) -> list[str]:
    """Every remote reference a built page or stylesheet fetches: ``page: tag attr=URL``."""
    found = []
    for page in sorted(site.rglob("*.html")):
        parsed = _parse(page)
        where = page.relative_to(site)
        for tag, attr, value in parsed.fetched:
            urls = [u.split()[0] for u in value.split(",") if u.strip()] if attr == "srcset" \
                else [value]
            found += [f"{where}: <{tag} {attr}={u}>" for u in urls if _REMOTE.match(u)]
        for style in parsed.styles:
            found += [f"{where}: style {u or i}" for u, i in _CSS_URL.findall(style)
                      if _REMOTE.match(u or i)]
    for sheet in sorted(site.rglob("*.css")):
        text = re.sub(r"/\*.*?\*/", "", sheet.read_text(encoding="utf-8"), flags=re.DOTALL)
        found += [f"{sheet.relative_to(site)}: {u or i}" for u, i in _CSS_URL.findall(text)
                  if _REMOTE.match(u or i)]
    return found


def test_docs_build_without_warnings(site: Path) -> None:
    assert (site / "index.html").exists()
    assert (site / "theory" / "longitudinal.html").exists()
    assert (site / "_static" / "mathjax" / "tex-chtml.js").exists()


def test_remote_asset_check_sees_them(tmp_path: Path) -> None:
    """The check below finds a remote script, stylesheet, font and image, and lets links and
    local files pass."""
    (tmp_path / "p.html").write_text(
        '<html><head><script src="https://cdn.example.org/m.js"></script>'
        '<link rel="stylesheet" href="//fonts.example.org/css">'
        '<link rel="stylesheet" href="_static/local.css"><style>p{background:'
        'url("http://img.example.org/x.png")}</style></head><body>'
        '<a href="https://example.org">a link</a><img src="_images/a.png">'
        '<img srcset="a.png 1x, https://img.example.org/b.png 2x"></body></html>',
        encoding="utf-8")
    (tmp_path / "local.css").write_text(
        "/* https://example.org in a comment */ @font-face {src: url(https://f.example.org/a.woff)}"
        " .x {background: url(../_images/a.png)}", encoding="utf-8")
    found = remote_assets(tmp_path)
    assert [f.split(": ", 1)[1] for f in found] == [
        "<script src=https://cdn.example.org/m.js>",
        "<link href=//fonts.example.org/css>",
        "<img srcset=https://img.example.org/b.png>",
        "style http://img.example.org/x.png",
        "https://f.example.org/a.woff",
    ]


def test_no_page_asks_for_a_remote_asset(site: Path) -> None:
    found = remote_assets(site)
    assert not found, f"remote scripts, stylesheets, fonts or images: {found[:20]}"


def test_formulas_render_offline_in_chromium(site: Path) -> None:
    """Every written page opened in Chromium with every non-file request refused: MathJax (the
    site's own copy) typesets every formula with its own fonts, and nothing asks the network."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the [test] extra is missing")
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    pages = sorted(p for p in site.rglob("*.html")
                   if "generated" not in p.parts and p.name not in {"genindex.html",
                                                                    "search.html"})
    refused: list[str] = []
    typeset: dict[str, tuple[int, int, bool]] = {}
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"])
        try:
            page = browser.new_page()

            def guard(route: object) -> None:
                url = route.request.url  # type: ignore[attr-defined]
                if url.startswith(("file:", "data:", "blob:", "about:")):
                    route.continue_()  # type: ignore[attr-defined]
                else:
                    refused.append(url)
                    route.abort()  # type: ignore[attr-defined]

            page.route("**/*", guard)
            for path in pages:
                page.goto(path.as_uri(), wait_until="load")
                typeset[str(path.relative_to(site))] = page.evaluate(
                    """async () => {
                        const math = document.querySelectorAll('.math').length;
                        if (!math) return [0, 0, true];
                        if (!window.MathJax?.startup) return [math, 0, false];
                        await window.MathJax.startup.promise;
                        await document.fonts.ready;
                        const done = document.querySelectorAll('.math mjx-container').length;
                        const fonts = [...document.fonts].filter(f => f.family.includes('MJX'));
                        return [math, done,
                                fonts.some(f => f.status === 'loaded')
                                && !fonts.some(f => f.status === 'error')];
                    }""")
        finally:
            browser.close()
    assert not refused, f"pages asked the network for: {sorted(set(refused))[:20]}"
    with_math = {name: v for name, v in typeset.items() if v[0]}
    assert "theory/profile.html" in with_math
    assert "guide/grouped.html" in with_math
    untypeset = {name: v for name, v in with_math.items() if v[1] != v[0] or not v[2]}
    assert not untypeset, f"(formulas, typeset, fonts loaded) per page: {untypeset}"


@pytest.mark.parametrize("name", GUIDE_PAGES)
def test_guide_page_shows_output_and_figure_of_its_code(site: Path, name: str) -> None:
    """Under its examples each guide page shows what they printed and at least one figure they
    drew, named after the page (so a figure of another page or a stale file cannot stand in)."""
    html = site / (f"{name}.html" if name == "getting-started" else f"guide/{name}.html")
    parsed = _parse(html)
    outputs = [c for c in parsed.divs if "dpfreq-output" in c.split()]
    figures = [src for classes, srcs in parsed.images.items()
               if "dpfreq-figure" in classes.split() for src in srcs]
    assert outputs, f"{html.name}: no output of its examples"
    assert figures, f"{html.name}: no figure drawn by its examples"
    stem = "getting-started" if name == "getting-started" else f"guide-{name}"
    for src in figures:
        image = (html.parent / src).resolve()
        assert image.name.startswith(f"{stem}-"), src
        assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", src
