"""The docs site (`make docs`, scripts/build_docs.py) works offline: every page's scripts are local (MathJax from the
site's own copy), the front page links to every notebook in reading order, and no nbdev directive or prompt shows."""
import html
import importlib.util
import re
import sys

import nbformat
import pytest
from conftest import ROOT

_spec = importlib.util.spec_from_file_location("build_docs", ROOT / "scripts" / "build_docs.py")
build_docs = sys.modules["build_docs"] = importlib.util.module_from_spec(_spec)   # its dataclasses look it up there
_spec.loader.exec_module(build_docs)

SCRIPT = re.compile(r"<script\b([^>]*)>", re.I)
SRC = re.compile(r"""\bsrc\s*=\s*["']?([^"'\s>]+)""", re.I)
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)    # http://, https://, //host (anything but a local path)
HREF = re.compile(r'<a\s[^>]*href="([^"]+)"', re.I)
PROMPT = re.compile(r"\b(?:In|Out) ?\[ ?\d* ?\]:")


def _notebooks():
    "Every notebook the site must have, in reading order, as its page's path relative to the site."
    nbs = ROOT / "nbs"
    chapters = [f"{p.stem}.html" for p in sorted(nbs.glob("*.ipynb")) if p.name != "index.ipynb"]
    return chapters + [f"{sec}/{p.stem}.html" for sec in ("paper", "experiments")
                       for p in sorted((nbs / sec).glob("*.ipynb"))]


def _text(page: str) -> str:
    "What a reader sees of a page: no scripts, styles or tags, entities decoded."
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S | re.I)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    try:
        build_docs.mathjax_dir(build_docs.DEFAULT_CACHE)
    except build_docs.MathJaxUnavailable as e:
        pytest.skip(f"no local MathJax to build the docs with: {e}")
    out = tmp_path_factory.mktemp("docs")
    build_docs.build(out, log=lambda *a: None)
    return out


def test_every_page_is_built(site):
    missing = [p for p in ["index.html", *_notebooks()] if not (site / p).is_file()]
    assert not missing, f"no page for {missing}"


def test_no_remote_scripts(site):
    remote = {}
    for page in sorted(site.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        srcs = [m.group(1) for tag in SCRIPT.findall(text) if (m := SRC.search(tag))]
        bad = [s for s in srcs if REMOTE.match(s)]
        bad += re.findall(r"""import\(\s*["']((?:https?:)?//[^"']+)""", text)   # a module script's dynamic import
        bad += re.findall(r"""<link\b[^>]*href=["']((?:https?:)?//[^"']+)""", text, re.I)
        if bad:
            remote[page.relative_to(site).as_posix()] = bad
    assert not remote, f"pages that load from the network: {remote}"


def test_mathjax_is_local_and_referenced(site):
    js = site / build_docs.MATHJAX_JS
    assert js.is_file() and js.stat().st_size > 500_000, f"{js} missing or truncated"
    assert b"MathJax" in js.read_bytes()[:5000] or b"MathJax" in js.read_bytes()
    unreferenced = []
    for page in sorted(site.rglob("*.html")):
        srcs = [m.group(1) for tag in SCRIPT.findall(page.read_text(encoding="utf-8")) if (m := SRC.search(tag))]
        if not any((page.parent / s).resolve() == js.resolve() for s in srcs):
            unreferenced.append(page.relative_to(site).as_posix())
    assert not unreferenced, f"pages that do not load the local MathJax: {unreferenced}"


def test_front_page_links_every_notebook_in_order(site):
    links = HREF.findall((site / "index.html").read_text(encoding="utf-8"))
    expected = _notebooks()
    missing = [p for p in expected if p not in links]
    assert not missing, f"index.html does not link to {missing}"
    first = [links.index(p) for p in expected]
    assert first == sorted(first), "the front page's contents are not in file-name (reading) order"


def test_nav_bar_chains_the_pages(site):
    order = ["index.html", *_notebooks()]
    for prev, page, nxt in zip([None, *order[:-1]], order, [*order[1:], None]):
        text = (site / page).read_text(encoding="utf-8")
        nav = re.search(r'<nav class="docs-nav">(.*?)</nav>', text, re.S)
        assert nav, f"{page} has no nav bar"
        targets = {(site / page).parent.joinpath(h.split("#")[0]).resolve() for h in HREF.findall(nav.group(1))}
        for want in (prev, nxt, "index.html"):
            if want:
                assert (site / want).resolve() in targets, f"{page}'s nav bar does not link to {want}"


def test_no_directives_or_prompts_shown(site):
    shown = {}
    for page in sorted(site.rglob("*.html")):
        text = _text(page.read_text(encoding="utf-8"))
        bad = (["#|"] if "#|" in text else []) + PROMPT.findall(text)
        if bad:
            shown[page.relative_to(site).as_posix()] = bad
    assert not shown, f"directives or prompts visible in {shown}"


def test_paper_pages_say_where_their_outputs_come_from(site):
    for page in _notebooks():
        if page.startswith("paper/"):
            text = _text((site / page).read_text(encoding="utf-8"))
            assert "Executed at scale" in text or "Not executed here: run make reproduce" in text, page


def test_hidden_cells_left_out_and_directives_stripped():
    "On a small notebook: `#| hide` drops the cell, `#| export` shows its code without the line, no prompts."
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# T\n\n> s\n\nSee $a^2$."),
        nbformat.v4.new_code_cell("#| default_exp things"),
        nbformat.v4.new_code_cell("#| hide\nSECRET_HIDDEN = 1"),
        nbformat.v4.new_code_cell("#|export\ndef shown_function(): pass"),
        nbformat.v4.new_code_cell("#| echo: false\nINPUT_HIDDEN = 2",
                                  outputs=[nbformat.v4.new_output("stream", name="stdout", text="visible output\n")]),
    ])
    resources = {"docs": {"nav": "", "notes": [], "mathjax": "m.js"}}
    body, _ = build_docs.exporter().from_notebook_node(nb, resources=resources)
    text = _text(body)
    assert "shown_function" in text and "visible output" in text
    for gone in ("SECRET_HIDDEN", "INPUT_HIDDEN", "default_exp", "#|"):
        assert gone not in text, gone
    assert not PROMPT.search(text)


def test_executed_copy_preferred(tmp_path):
    "A paper notebook's page comes from runs/artifacts/cpu/ before smoke/, and from nbs/paper/ without either."
    name = sorted((ROOT / "nbs" / "paper").glob("*.ipynb"))[0].name
    for scale in ("smoke", "cpu"):
        (tmp_path / "artifacts" / scale).mkdir(parents=True)
        (tmp_path / "artifacts" / scale / name).write_text("{}")
    by_name = {p.committed.name: p for p in build_docs.pages(ROOT, runs_dir=tmp_path) if p.section == "paper"}
    assert by_name[name].executed == "cpu" and by_name[name].src == tmp_path / "artifacts" / "cpu" / name
    other = next(n for n in by_name if n != name)
    assert by_name[other].executed is None and by_name[other].src == ROOT / "nbs" / "paper" / other
