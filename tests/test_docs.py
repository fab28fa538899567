"""The docs site (`make docs`, scripts/build_docs.py) works offline: every page's scripts are local (MathJax from the
site's own copy), the front page links to every notebook in reading order, and no nbdev directive or prompt shows.
Every formula is left whole to MathJax (no raw LaTeX in the text, no list item inside math), the paper pages show
the committed results of the default scale (cpu) with the code revision that made them, and wide tables scroll."""
import html
import importlib.util
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup, Comment, NavigableString, Tag   # nbconvert's own dependency
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
            assert "Executed at scale" in text or "Not executed here: the code below is shown as committed" in text, page


# ---------------------------------------------------------------------------------------------------------------
# The paper pages show the results of the default scale, with the code revision that made them

def _paper_artifacts():
    "(page, artifact) for every paper notebook the registry names."
    from coupled_qk.registry import ARTIFACTS
    return [(f"paper/{Path(a.notebook).stem}.html", a.name) for a in ARTIFACTS.values()]


def test_paper_pages_show_the_default_scales_results(site):
    """Each paper page shows, at scale cpu, every figure (.png) and table (.md) its artifact has under
    figures/cpu/<artifact>/, and the code revision and date its provenance.json records; or says in one line that
    there are none."""
    assert build_docs.DEFAULT_SCALE == "cpu"
    for page, art in _paper_artifacts():
        soup = BeautifulSoup((site / page).read_text(encoding="utf-8"), "html.parser")
        box = soup.find("div", class_="docs-results")
        assert box is not None, f"{page} shows no results"
        text = " ".join(box.get_text(" ").split())
        assert "Results at scale cpu" in text, page
        d = ROOT / "figures" / "cpu" / art
        if not d.is_dir():
            assert box.find(class_="docs-results-none") and f"figures/cpu/{art}/" in text, page
            continue
        prov = json.loads((d / "provenance.json").read_text())
        line = " ".join(box.find("p", class_="docs-provenance").get_text(" ").split())
        assert "scale cpu" in line and prov["git"].removesuffix("+dirty") in line and prov["date"] in line, (page, line)
        shown = {(site / page).parent.joinpath(img["src"]).resolve() for img in box.find_all("img")}
        for png in d.glob("*.png"):
            site_png = (site / "figures" / "cpu" / art / png.name).resolve()
            assert site_png in shown and site_png.read_bytes() == png.read_bytes(), f"{page} lacks {png.name}"
        tables = {t["id"].removeprefix("table-"): t for t in box.find_all("div", class_="docs-result-table")}
        for md in d.glob("*.md"):
            t = tables.get(md.stem)
            assert t is not None, f"{page} lacks table {md.stem}"
            if (parsed := build_docs.md_table(md.read_text())) is None:     # an empty table: its caption, no rows
                caption, rows = " ".join(md.read_text().split()), None
                assert "(no rows)" in t.get_text(), f"{page}: empty table {md.stem} not said to be empty"
            else:
                caption, rows, _ = parsed
                got = [[c.get_text() for c in tr.find_all(["th", "td"])] for tr in t.table.find_all("tr")]
                assert got == rows, f"{page}: table {md.stem} is not the committed {md.relative_to(ROOT)}"
            assert caption in " ".join(t.p.get_text(" ").split()), f"{page}: table {md.stem} lacks its caption"
        # the page of a notebook committed without outputs still shows the numbers: the site's first table holds them
        assert box.find("table") is not None or not list(d.glob("*.md")), page


def _fake_artifact(root, scale="cpu", art="fake", git="abc1234+dirty"):
    d = root / "figures" / scale / art
    d.mkdir(parents=True)
    (d / "wide.md").write_text("A wide table (scale: cpu)\n\n| a | b_c |\n|:--|----:|\n| x<y | 1.5 |\n")
    (d / "wide.csv").write_text("a,b_c\nx<y,1.5\n")
    (d / "empty.md").write_text("An empty table (scale: cpu)\n\n\n")
    (d / "empty.csv").write_text("\n")
    (d / "curve_data.csv").write_text("t,v\n" + "".join(f"{i},{i}\n" for i in range(200)))
    (d / "plot.png").write_bytes(b"\x89PNG fake")
    (d / "provenance.json").write_text(json.dumps({"scale": scale, "git": git, "date": "2026-01-02 03:04:05 UTC",
                                                   "coupled_qk": "0.1.0", "runs": ["r1", "r2"], "notes": ["n1"]}))
    return d


def test_results_html_on_a_small_artifact(tmp_path):
    "Tables escaped and aligned, a long csv-only table only linked, the figure copied, provenance said; or one line."
    root, site = tmp_path / "repo", tmp_path / "site"
    _fake_artifact(root)
    out = build_docs.results_html(root, "cpu", "fake", site, "paper/x.html", 'w.figure(fig, "plot")', changed=set())
    soup = BeautifulSoup(out, "html.parser")
    prov = " ".join(soup.find("p", class_="docs-provenance").get_text(" ").split())
    assert "scale cpu" in prov and "abc1234 with uncommitted changes" in prov and "2026-01-02 03:04:05 UTC" in prov
    assert "from 2 runs" in prov and "committed under figures/cpu/fake/" in prov and "n1" in prov
    wide = soup.find("div", id="table-wide")
    assert [[c.get_text() for c in tr.find_all(["th", "td"])] for tr in wide.find_all("tr")] == [["a", "b_c"],
                                                                                             ["x<y", "1.5"]]
    assert "x&lt;y" in out and wide.find("td", style="text-align: right")
    curve = soup.find("div", id="table-curve_data")
    assert curve.find("table") is None and "200 rows" in curve.get_text() and curve.a["href"].endswith(".csv")
    empty = soup.find("div", id="table-empty")
    assert "An empty table" in empty.p.get_text() and "(no rows)" in empty.get_text() and empty.table is None
    assert soup.img["src"] == "../figures/cpu/fake/plot.png" and (site / "figures/cpu/fake/plot.png").is_file()
    local = build_docs.results_html(root, "cpu", "fake", site, "paper/x.html", changed={"figures/cpu/fake/plot.png"})
    assert "Not the committed files" in local
    none = BeautifulSoup(build_docs.results_html(root, "cpu", "absent", site, "paper/x.html"), "html.parser")
    line = none.find("p", class_="docs-results-none")
    assert line is not None and "figures/cpu/absent/" in line.get_text() and len(none.find_all("p")) == 1


def test_smoke_results_only_when_asked(tmp_path):
    "A smoke run's figures and executed copy replace the cpu ones only at scale smoke (DOCS_SCALE=smoke)."
    root, site = tmp_path / "repo", tmp_path / "site"
    _fake_artifact(root, "cpu", git="c0ffee1")
    _fake_artifact(root, "smoke", git="5a10ke0")
    assert "c0ffee1" in build_docs.results_html(root, build_docs.DEFAULT_SCALE, "fake", site, "p/x.html")
    assert "5a10ke0" in build_docs.results_html(root, "smoke", "fake", site, "p/x.html")


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


def test_executed_copy_only_at_the_docs_scale(tmp_path):
    """A paper notebook's page comes from runs/artifacts/<scale>/ at the docs' scale (cpu unless asked), never from
    another scale's copy: a smoke run does not stand in for the cpu results; without one, from nbs/paper/."""
    name, other = [p.name for p in sorted((ROOT / "nbs" / "paper").glob("*.ipynb"))[:2]]
    for scale, names in (("smoke", (name, other)), ("cpu", (name,))):
        (tmp_path / "artifacts" / scale).mkdir(parents=True)
        for n in names:
            (tmp_path / "artifacts" / scale / n).write_text("{}")

    def by_name(**kw):
        return {p.committed.name: p for p in build_docs.pages(ROOT, runs_dir=tmp_path, **kw) if p.section == "paper"}
    cpu = by_name()
    assert cpu[name].executed == "cpu" and cpu[name].src == tmp_path / "artifacts" / "cpu" / name
    assert cpu[other].executed is None and cpu[other].src == ROOT / "nbs" / "paper" / other
    smoke = by_name(scale="smoke")
    assert smoke[name].executed == smoke[other].executed == "smoke"
    third = next(n for n in cpu if n not in (name, other))
    assert smoke[third].executed is None


def test_docs_scale_from_the_environment(monkeypatch):
    "`make docs DOCS_SCALE=smoke` (or DOCS_SCALE in the environment) asks for the smoke results; cpu otherwise."
    seen = {}
    monkeypatch.setattr(build_docs, "build", lambda *a, **kw: seen.update(kw))
    monkeypatch.delenv("DOCS_SCALE", raising=False)
    build_docs.main(["--out", "unused"])
    assert seen["scale"] == "cpu"
    monkeypatch.setenv("DOCS_SCALE", "smoke")
    build_docs.main(["--out", "unused"])
    assert seen["scale"] == "smoke"
    assert "--scale $(DOCS_SCALE)" in (ROOT / "Makefile").read_text()


# ---------------------------------------------------------------------------------------------------------------
# Wide tables scroll

TABLE_RULE = re.compile(r"\.jp-RenderedHTMLCommon table\s*\{([^}]*)\}")


def test_wide_tables_scroll(site):
    """Every table on every page (results, notebook outputs, markdown) lies in a rendered cell whose tables are
    their own sideways scroll box, so a wide one scrolls instead of being clipped by the cell's overflow: hidden."""
    bad = {}
    for page in sorted(site.rglob("*.html")):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        css = " ".join(s.get_text() for s in soup.find_all("style"))
        rules = [" ".join(m.group(1).split()) for m in TABLE_RULE.finditer(css)]
        scrolls = any("overflow-x: auto" in r and "display: block" in r and "max-width: 100%" in r for r in rules)
        loose = [t for t in soup.find_all("table") if not t.find_parent(class_="jp-RenderedHTMLCommon")]
        if not scrolls or loose:
            bad[page.relative_to(site).as_posix()] = (scrolls, len(loose))
    assert not bad, f"pages whose tables are not scroll boxes (rule present, tables outside it): {bad}"


# ---------------------------------------------------------------------------------------------------------------
# Every formula is left whole to MathJax: no raw LaTeX in what a reader sees, no list item that begins inside math

# What MathJax skips (its skipHtmlTags, and the svg / math it makes itself), and the tags it reads through: any other
# element ends a run of text, so math cut by an element (markdown's <em> in $a_1 b_1$, a list made of a `+` line)
# is never typeset.
MATH_SKIP = {"script", "noscript", "style", "textarea", "pre", "code", "annotation", "annotation-xml", "svg", "math"}
MATH_THROUGH = {"br": "\n", "wbr": ""}
MATH_OPEN = re.compile(r"\\\$|\$\$|\$|\\\(|\\\[|\\begin\{([A-Za-z]+\*?)\}")   # the page's MathJax config: $ $$ \( \[ and environments
MATH_CLOSE = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}
RAW_TEX = re.compile(r"\$|\\[A-Za-z]+")


def _math_end(s: str, j: int, close: str) -> int | None:
    "Where the math opened before `j` ends (after `close`, outside braces, as MathJax's FindTeX reads it), or None."
    depth = 0
    while j < len(s):
        if s[j] == "\\" and j + 1 < len(s) and s[j + 1] in "{}$\\%":
            if depth == 0 and s.startswith(close, j):
                return j + len(close)
            j += 2
            continue
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth = max(0, depth - 1)
        elif depth == 0 and s.startswith(close, j):
            return j + len(close)
        j += 1
    return None


def strip_math(s: str) -> tuple[str, bool]:
    """`s` without the math MathJax will typeset (and without `\\$`, its escaped dollar), and whether a math opener
    was left without its close."""
    out, i, unclosed = [], 0, False
    while m := MATH_OPEN.search(s, i):
        out.append(s[i:m.start()])
        tok = m.group(0)
        if tok == "\\$":
            i = m.end()
            continue
        end = _math_end(s, m.end(), MATH_CLOSE.get(tok) or f"\\end{{{m.group(1)}}}")
        if end is None:
            out.append(tok)
            unclosed, i = True, m.end()
        else:
            i = end
    out.append(s[i:])
    return "".join(out), unclosed


def _text_runs(el, skip_classes=("tex2jax_ignore",)):
    "(element, text) for each run of text MathJax reads as one string, in document order."
    cur = []
    for ch in el.children:
        if isinstance(ch, Comment):
            continue
        if isinstance(ch, NavigableString):
            cur.append(str(ch))
        elif isinstance(ch, Tag) and ch.name in MATH_THROUGH:
            cur.append(MATH_THROUGH[ch.name])
        elif isinstance(ch, Tag):
            if cur:
                yield el, "".join(cur)
                cur = []
            if ch.name not in MATH_SKIP and not set(ch.get("class") or []) & set(skip_classes):
                yield from _text_runs(ch, skip_classes)
    if cur:
        yield el, "".join(cur)


def raw_tex(page_html: str) -> list[str]:
    """What a reader would see of LaTeX on a page: each `$` or `\\command` left in the text outside code and outside
    the math MathJax typesets, and each list item that begins inside math (a formula's line that markdown read as a
    list), with the text around it."""
    soup = BeautifulSoup(page_html, "html.parser")
    found, prev_unclosed, seen_li = [], False, set()
    for el, run in _text_runs(soup.body or soup):
        if not run.strip():
            continue
        li = el if el.name == "li" else el.find_parent("li")
        if li is not None and id(li) not in seen_li:
            seen_li.add(id(li))
            if prev_unclosed:
                found.append(f"list item inside math: {' '.join(run.split())[:100]!r}")
        text, prev_unclosed = strip_math(run)
        found += [f"{m.group(0)!r} in {' '.join(text[max(0, m.start() - 50):m.end() + 50].split())!r}"
                  for m in RAW_TEX.finditer(text)]
    return found


def test_every_formula_is_left_to_mathjax(site):
    bad = {}
    for page in sorted(site.rglob("*.html")):
        if found := raw_tex(page.read_text(encoding="utf-8")):
            bad[page.relative_to(site).as_posix()] = found[:5]
    assert not bad, f"raw LaTeX or list items inside math on {len(bad)} pages: {bad}"


def _render(markdown: str) -> str:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown)])
    body, _ = build_docs.exporter().from_notebook_node(nb, resources={"docs": {"nav": "", "notes": [], "mathjax": "m.js"}})
    return body


def test_the_math_check_can_fail():
    """The check finds what broke the Hugging Face chapter (a formula's line starting with `+`, read as a list: raw
    `$k_g' ... \\odot` and a bullet inside math) and raw commands in text, and passes math, escaped dollars and code."""
    broken = _render("and $k_g' = k_g \\odot \\overline{e^{s_2(q')}}\n+ \\overline{t_2(q')}$ solves for $k_g$.")
    found = raw_tex(broken)
    assert any(f.startswith("list item inside math") for f in found), found
    assert any("'$'" in f for f in found) and any("odot" in f for f in found), found
    fixed = _render("and\n$k_g' = k_g \\odot \\overline{e^{s_2(q')}} + \\overline{t_2(q')}$ solves for $k_g$.\n\n"
                    "$$d_i = \\frac{a}{b},\n\\qquad \\bar d$$\n\n`$HOME` and `\\odot` are code;"
                    " \\(x\\) and \\[y\\] and $a_{\\$}$.\n\n\\begin{align}a &= b\\end{align}")
    assert raw_tex(fixed) == [], raw_tex(fixed)
    assert raw_tex("<p>the ratio \\frac{a}{b} shown raw</p>") == ["'\\\\frac' in 'the ratio \\\\frac{a}{b} shown raw'"]
    assert raw_tex("<p>an <em>emphasised</em> $a_1 <em>b</em>_1$</p>")     # math cut by an element is not typeset
    assert raw_tex("<p>costs \\$5, MathJax's escaped dollar</p>") == []
    assert raw_tex("<p>costs $5</p>") == ["'$' in 'costs $5'"]
    assert raw_tex("<p>ok</p><pre>$ make docs \\odot</pre><script>var a = '$\\x';</script>") == []
