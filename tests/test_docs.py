"""The docs site (`make docs`: Sphinx with myst-nb, configured in docs/conf.py) builds from the committed notebooks
without warnings and works with no network: no page loads a script or stylesheet from another host, every page with
math loads the site's own MathJax, and every link inside the site resolves. The front page lists every notebook in
reading order, and each paper page shows its artifact's committed figures and tables (as tables)."""
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup
from conftest import ROOT

MATHJAX = "_static/tex-svg-full.js"


def _remote(url: str) -> bool:
    "http://, https://, //host: anything a browser would fetch from another host."
    return bool(re.match(r"^(?:[a-z][a-z0-9+.-]*:)?//", url.strip(), re.I))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    "The site, built once as `make docs` builds it: (its folder, {page relative to it: parsed HTML}, the warnings)."
    out = tmp_path_factory.mktemp("docs")
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-E", "-q", "-c", "docs", "-d", str(out / "doctrees"),
           "nbs", str(out / "html")]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "DOCS_SCALE": "cpu"})
    assert r.returncode == 0, f"sphinx-build failed:\n{r.stderr[-3000:]}"
    html = out / "html"
    pages = {p.relative_to(html).as_posix(): BeautifulSoup(p.read_text(encoding="utf-8"), "html.parser")
             for p in sorted(html.rglob("*.html"))}
    return html, pages, r.stderr


def _notebooks():
    "Every notebook's page in reading order: the chapters, the paper notebooks, the experiments (file-name order)."
    nbs = ROOT / "nbs"
    return [f"{p.stem}.html" for p in sorted(nbs.glob("[0-9]*.ipynb"))] + \
        [f"{sec}/{p.stem}.html" for sec in ("paper", "experiments") for p in sorted((nbs / sec).glob("*.ipynb"))]


def test_builds_without_warnings(site):
    "A broken cross-reference, a missing image or a notebook outside the contents is a Sphinx warning."
    warnings = [line for line in site[2].splitlines() if re.search(r"\b(WARNING|ERROR|CRITICAL)\b", line)]
    assert not warnings, "sphinx-build warned:\n" + "\n".join(warnings[:20])


def test_front_page_lists_every_notebook_in_reading_order(site):
    html, pages, _ = site
    toc = [a["href"] for w in pages["index.html"].select("div.toctree-wrapper") for a in w.find_all("a", href=True)]
    assert [h.split("#")[0] for h in toc] == _notebooks()


def test_no_remote_script_or_stylesheet(site):
    html, pages, _ = site
    remote, sheets = {}, set()
    for name, soup in pages.items():
        urls = [s["src"] for s in soup.find_all("script", src=True)]
        links = [ln["href"] for ln in soup.find_all("link", href=True) if "stylesheet" in (ln.get("rel") or [])]
        sheets |= {(html / name).parent.joinpath(urlsplit(h).path).resolve() for h in links if not _remote(h)}
        if bad := [u for u in urls + links if _remote(u)]:
            remote[name] = bad
    for css in sheets:                             # and no stylesheet fetches a font or another sheet remotely
        found = re.findall(r"""(?:@import\s+|url\(\s*)["']?((?:[a-z]+:)?//[^"')\s]+)""", css.read_text())
        if found:
            remote[css.relative_to(html).as_posix()] = found
    assert not remote, f"loaded from another host: {remote}"


def test_every_page_with_math_loads_the_local_mathjax(site):
    html, pages, _ = site
    js = html / MATHJAX
    assert js.is_file() and js.stat().st_size > 500_000 and b"MathJax" in js.read_bytes()
    with_math = [n for n, soup in pages.items() if soup.select(".math")]
    assert "01_attention.html" in with_math and "paper/01_main_table.html" in with_math, with_math
    missing = [n for n in with_math if not any((html / n).parent.joinpath(urlsplit(s["src"]).path).resolve() == js
                                               for s in pages[n].find_all("script", src=True))]
    assert not missing, f"pages with math that do not load {MATHJAX}: {missing}"


def test_every_internal_link_resolves(site):
    "Every href and src inside the site names a file that exists, and every #anchor an id on its page."
    html, pages, _ = site
    ids = {n: {t["id"] for t in soup.find_all(id=True)} for n, soup in pages.items()}
    broken = {}
    for name, soup in pages.items():
        for tag in soup.find_all(["a", "link", "script", "img"]):
            url = tag.get("href") or tag.get("src")
            if not url or _remote(url) or url.startswith(("mailto:", "data:", "javascript:")):
                continue
            parts = urlsplit(url)
            target = (html / name).parent.joinpath(unquote(parts.path)).resolve() if parts.path else html / name
            rel = target.relative_to(html).as_posix() if target.is_relative_to(html) else None
            if rel is None or not target.is_file() or (parts.fragment and rel in ids
                                                       and unquote(parts.fragment) not in ids[rel]):
                broken.setdefault(name, []).append(url)
    assert not broken, f"links that do not resolve: {broken}"


def test_paper_pages_show_their_committed_results(site):
    "Each paper page shows every figure and (non-empty) table its artifact committed under figures/cpu/, as a table."
    from coupled_qk.registry import ARTIFACTS
    html, pages, _ = site
    for a in ARTIFACTS.values():
        page, d = f"paper/{Path(a.notebook).stem}.html", ROOT / "figures" / "cpu" / a.name
        box = pages[page].find("section", id="results-at-scale-cpu")
        assert box is not None, f"{page} shows no results"
        if not d.is_dir():
            assert f"figures/cpu/{a.name}/" in box.get_text(), page
            continue
        n_tables = sum(bool(md.read_text().partition("\n\n")[2].strip()) for md in d.glob("*.md"))
        assert len(box.find_all("table")) == n_tables, f"{page}: not every table of {d.name} shown as a table"
        shown = {(html / page).parent.joinpath(i["src"]).resolve().read_bytes() for i in box.find_all("img")}
        assert all(p.read_bytes() in shown for p in d.glob("*.png")), f"{page}: a figure of {d.name} is missing"


def test_every_formula_is_typeset(site):
    "No `$` or LaTeX command is left in what a reader sees outside code, outputs and the math MathJax typesets."
    raw = {}
    for name, soup in site[1].items():
        main = BeautifulSoup(str(soup.find("article") or soup), "html.parser")
        for t in main.find_all(["script", "style", "pre", "code", "svg"]) + main.select(".math, .cell_output"):
            t.decompose()
        text = " ".join(main.get_text(" ").split())
        if found := [text[max(0, m.start() - 40):m.end() + 40] for m in re.finditer(r"\$|\\[A-Za-z]+", text)]:
            raw[name] = found[:3]
    assert not raw, f"raw LaTeX shown: {raw}"


def test_no_nbdev_directive_shown(site):
    shown = [n for n, soup in site[1].items() if "#|" in soup.get_text()]
    assert not shown, f"nbdev directives visible on {shown}"
