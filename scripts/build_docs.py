"""Build the docs site (`make docs`): nbs/index.ipynb as the front page with a table of contents, then every chapter
(nbs/*.ipynb), paper notebook (nbs/paper/*.ipynb) and experiment notebook (nbs/experiments/*.ipynb) in file-name
order, each page with a previous / contents / next bar. The site works with no network: math is typeset by a local
copy of MathJax 3 (its single-file SVG build, which needs no font files) taken from the PyPI wheel
django-static-mathjax, and no page loads anything from another host.

- nbdev directives (`#| ...` lines) are stripped from the code shown; `#| hide` (or `#| include: false`) cells are
  left out, `#| echo: false` shows only the outputs, `#| output: false` only the code; no In/Out prompts.
- A paper page shows the results of its artifact at the docs' scale (default cpu, the default scale of `make
  reproduce`; `--scale smoke` or DOCS_SCALE=smoke to show a smoke run instead): the tables (.md, else .csv) and
  figures (.png) under figures/<scale>/<artifact>/, with the scale, code revision and date its provenance.json
  records, after the notebook's introduction; then the notebook as `coupled-qk reproduce` executed it at that scale
  (runs/artifacts/<scale>/<notebook>.ipynb) where there is such a copy, else as committed, with a note saying which.
  A run at another scale never replaces them. An experiment notebook is shown from
  runs/artifacts/<scale>/experiments/<notebook>.ipynb where one exists (the docs' scale first).
- Wide tables scroll sideways instead of being clipped.

    python scripts/build_docs.py [--out _docs] [--scale cpu] [--execute]
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import nbformat
from jinja2 import DictLoader
from nbconvert import HTMLExporter
from nbconvert.preprocessors import Preprocessor

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = (("", "Chapters"), ("paper", "Paper"), ("experiments", "Experiments"))
SCALES = ("cpu", "smoke")   # an experiment notebook's executed copy: the docs' scale first, then these
DEFAULT_SCALE = "cpu"       # whose results the paper pages show: the default scale of `make reproduce`

# MathJax: one pinned wheel from PyPI. Installed in the environment (`make setup`, once the lock pins it) it is used
# from there; otherwise pip downloads the wheel once into the cache folder, where it is checked against its hash and
# the files the site needs are kept (the wheel itself is then removed).
MATHJAX_DIST = "django-static-mathjax"
MATHJAX_VERSION = "3.2.2.1"
MATHJAX_WHEEL = "django_static_mathjax-3.2.2.1-py3-none-any.whl"
MATHJAX_SHA256 = "05ad109fd9e5d9d380c76389689b7f523e9ccb7f7a85c1eb962c7564eac7601d"
MATHJAX_IN_WHEEL = "mathjax/static/mathjax/"        # MathJax's own tree inside the wheel
MATHJAX_FILES = ("es5/tex-svg-full.js", "LICENSE")  # what the site needs of it (about 2.3 MB)
MATHJAX_JS = "mathjax/tex-svg-full.js"               # where the site has it, relative to the site's root
DEFAULT_CACHE = ROOT / ".cache" / "docs"


class MathJaxUnavailable(RuntimeError):
    "No local MathJax: not installed, not cached, and the package index could not be reached."


def _installed_mathjax() -> Path | None:
    try:
        dist = metadata.distribution(MATHJAX_DIST)
    except metadata.PackageNotFoundError:
        return None
    base = Path(dist.locate_file(MATHJAX_IN_WHEEL))
    return base if all((base / f).is_file() for f in MATHJAX_FILES) else None


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def mathjax_dir(cache: Path = DEFAULT_CACHE, fetch: bool = True) -> Path:
    """A folder holding MATHJAX_FILES: the installed django-static-mathjax, else the cache's copy, else (`fetch`)
    the pinned wheel downloaded by pip into `cache`; raises MathJaxUnavailable, in one line, when none can be had."""
    if (d := _installed_mathjax()) is not None:
        return d
    cache = Path(cache)
    out = cache / f"mathjax-{MATHJAX_VERSION}"
    if all((out / f).is_file() for f in MATHJAX_FILES):
        return out
    wheel = cache / MATHJAX_WHEEL
    if not wheel.is_file():
        if not fetch:
            raise MathJaxUnavailable(f"no local MathJax: {MATHJAX_DIST} is not installed and {wheel} is not cached")
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                   "--only-binary=:all:", "--retries", "2", "--timeout", "20", "--dest", tmp,
                   f"{MATHJAX_DIST}=={MATHJAX_VERSION}"]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                ok = r.returncode == 0 and (Path(tmp) / MATHJAX_WHEEL).is_file()
                why = (r.stderr.strip().splitlines() or ["no error message"])[-1]
            except subprocess.TimeoutExpired:
                ok, why = False, "timed out after 300 s"
            if not ok:
                raise MathJaxUnavailable(f"cannot get MathJax: `pip download {MATHJAX_DIST}=={MATHJAX_VERSION}` "
                                         f"failed ({why}); is the package index reachable? (or pip install it)")
            shutil.move(str(Path(tmp) / MATHJAX_WHEEL), wheel)
    if (got := _sha256(wheel)) != MATHJAX_SHA256:
        wheel.unlink()
        raise MathJaxUnavailable(f"{MATHJAX_WHEEL} has sha256 {got}, not the pinned {MATHJAX_SHA256}: removed it")
    part = Path(tempfile.mkdtemp(dir=cache))           # extracted whole, then moved into place: never half a copy
    part.chmod(0o755)
    with zipfile.ZipFile(wheel) as z:
        for f in MATHJAX_FILES:
            (part / f).parent.mkdir(parents=True, exist_ok=True)
            (part / f).write_bytes(z.read(MATHJAX_IN_WHEEL + f))
    shutil.rmtree(out, ignore_errors=True)
    part.rename(out)
    wheel.unlink()                                     # 10 MB; the 2.3 MB the site needs stay in `out`
    return out


# ---------------------------------------------------------------------------------------------------------------
# Notebooks: which ones, in which order, and which copy of each

@dataclass
class Page:
    src: Path                 # the notebook rendered (an executed copy or the committed one)
    committed: Path           # the committed notebook under nbs/
    href: str                 # the page, relative to the site's root
    section: str              # "" (chapters and the front page), "paper", "experiments"
    title: str = ""
    summary: str = ""
    executed: str | None = None   # the scale of the executed copy shown, if any
    notes: list = field(default_factory=list)


def _title(nb) -> tuple[str, str]:
    "The notebook's `# Title` and its `> summary` (nbdev's convention), from its first markdown cell."
    for c in nb.cells:
        if c.cell_type != "markdown":
            continue
        lines = c.source.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("# "):
                summary = []
                for m in lines[i + 1:]:
                    if m.startswith(">"):
                        summary.append(m.lstrip("> ").strip())
                    elif m.strip() or summary:
                        break
                return line[2:].strip(), " ".join(summary)
        break
    return "", ""


def _runs_dir(root: Path) -> Path:
    try:
        from coupled_qk.settings import load_settings
        return Path(load_settings(root).runs_dir)
    except Exception:   # the site builds without the package too (or with broken settings): the default folder
        return root / "runs"


def pages(root: Path = ROOT, runs_dir: Path | None = None, scale: str = DEFAULT_SCALE) -> list[Page]:
    """Every page of the site in reading order: the front page, then each section's notebooks in file-name order.
    A paper notebook's executed copy is taken at `scale` only (a smoke run does not stand in for the cpu results);
    an experiment notebook's at `scale`, else at the first of SCALES that has one."""
    nbs = root / "nbs"
    runs_dir = Path(runs_dir) if runs_dir is not None else _runs_dir(root)
    out = [Page(nbs / "index.ipynb", nbs / "index.ipynb", "index.html", "")]
    for sec, _ in SECTIONS:
        for nb in sorted((nbs / sec).glob("*.ipynb")):
            if nb.name == "index.ipynb":
                continue
            p = Page(nb, nb, f"{sec}/{nb.stem}.html" if sec else f"{nb.stem}.html", sec)
            if sec in ("paper", "experiments"):
                others = [s for s in SCALES if s != scale] if sec == "experiments" else []
                for s in (scale, *others):
                    sub = runs_dir / "artifacts" / s / ("experiments" if sec == "experiments" else "")
                    if (sub / nb.name).is_file():
                        p.src, p.executed = sub / nb.name, s
                        break
            out.append(p)
    return out


# ---------------------------------------------------------------------------------------------------------------
# What a page shows of each cell

DIRECTIVE = re.compile(r"^\s*#\|\s?(.*)$")


def directives(source: str) -> dict:
    "A cell's `#| key: value` / `#| flag` lines as a dict (flags map to True); nbdev's and Quarto's alike."
    opts = {}
    for line in source.splitlines():
        if m := DIRECTIVE.match(line):
            body = m.group(1).strip()
            if ":" in body:
                k, v = body.split(":", 1)
                opts[k.strip()] = v.strip().lower()
            elif body:
                k, *rest = body.split(None, 1)
                opts[k] = rest[0] if rest else True
    return opts


class NbdevDocs(Preprocessor):
    "Strip nbdev directive lines from code cells and honour hide / include / echo / output; drop empty cells."

    def preprocess(self, nb, resources):
        cells = []
        for c in nb.cells:
            if c.cell_type == "raw":
                continue
            if c.cell_type == "code":
                opts = directives(c.source)
                tags = set(c.metadata.get("tags", []))
                if opts.get("hide") or opts.get("include") == "false" or tags & {"hide", "remove_cell", "remove-cell"}:
                    continue
                c.source = "\n".join(x for x in c.source.splitlines() if not DIRECTIVE.match(x)).strip("\n")
                if opts.get("output") == "false" or tags & {"remove_output", "remove-output"}:
                    c.outputs = []
                if opts.get("echo") == "false" or tags & {"remove_input", "remove-input", "hide_input"}:
                    c.source = ""
                if not c.source.strip():
                    if not c.get("outputs"):
                        continue
                    c.metadata.setdefault("transient", {})["remove_source"] = True
            cells.append(c)
        nb.cells = cells
        return nb, resources


SAVE_CALL = re.compile(r"""\.(figure|table)\([^"'\n]*?["']([\w.-]+)["']""")   # w.figure(fig, "x"), w.table(df, "y")
RESULTS_SLOT = "docs-results-slot"     # where a paper page's results go, filled in after nbconvert has rendered it
CSV_ROWS_SHOWN = 60                    # a table with only a .csv (a figure's data) is shown when it is this short


def _artifact(nb_path: Path) -> str:
    "The artifact a paper notebook makes: the registry's word, else the file name without its number."
    try:
        from coupled_qk.registry import ARTIFACTS
        for a in ARTIFACTS.values():
            if Path(a.notebook).name == nb_path.name:
                return a.name
    except Exception:
        pass
    return re.sub(r"^\d+[a-z]?_", "", nb_path.stem)


def md_table(text: str) -> tuple[str, list[list[str]], list[str]] | None:
    """A table as ArtifactWriter.table writes it (a caption line, a blank line, a pipe table), parsed by markdown-it
    (CommonMark with GitHub's tables): (caption, rows with the header first, each column's alignment), or None where
    the text holds no table."""
    from markdown_it import MarkdownIt
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    start = next((i for i, t in enumerate(tokens) if t.type == "table_open"), None)
    if start is None:
        return None
    caption = " ".join(t.content for t in tokens[:start] if t.type == "inline")
    rows, aligns, row = [], [], None
    for t in tokens[start:]:
        if t.type == "table_close":
            break
        if t.type == "tr_open":
            row = []
        elif t.type == "tr_close":
            rows.append(row)
        elif t.type == "th_open":
            style = str(t.attrs.get("style", ""))
            aligns.append(style.split(":")[-1] if "text-align" in style else "left")
        elif t.type == "inline" and row is not None:
            row.append(t.content)
    return caption, rows, aligns


def table_html(rows: list[list[str]], aligns: list[str] | None = None) -> str:
    "An HTML table (first row the header), every cell escaped."
    aligns = aligns or []

    def row(cells, tag):
        return "<tr>" + "".join(
            f'<{tag} style="text-align: {aligns[j] if j < len(aligns) else "left"}">{html.escape(c)}</{tag}>'
            for j, c in enumerate(cells)) + "</tr>"
    head, body = (rows[0], rows[1:]) if rows else ([], [])
    return (f'<table class="docs-results-table"><thead>{row(head, "th")}</thead>'
            f'<tbody>{"".join(row(r, "td") for r in body)}</tbody></table>')


def _changed(root: Path, scale: str) -> set[str] | None:
    "The paths under figures/<scale>/ that differ from the last commit (modified or untracked); None without git."
    try:
        r = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all", "--",
                            f"figures/{scale}"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    return {line[3:].strip().strip('"').split(" -> ")[-1] for line in r.stdout.splitlines() if len(line) > 3}


def provenance_line(prov: dict, scale: str, rel_dir: str, changed: bool | None) -> str:
    "One paragraph: the scale, code revision, date and machine that made an artifact's files, and where they are."
    if not prov:
        made = f"Made at scale <b>{html.escape(scale)}</b>; no <code>provenance.json</code> records which code made them."
    else:
        rev = str(prov.get("git") or "unknown")
        rev_html = (f"<code>{html.escape(rev.removesuffix('+dirty'))}</code> with uncommitted changes"
                    if rev.endswith("+dirty") else f"<code>{html.escape(rev)}</code>")
        hw = " ".join(str(prov.get("hardware") or "").split())
        made = (f"Made at scale <b>{html.escape(str(prov.get('scale', scale)))}</b> by coupled_qk "
                f"{html.escape(str(prov.get('coupled_qk', '?')))} at code revision {rev_html} on "
                f"{html.escape(str(prov.get('date') or 'a date not recorded'))}"
                + (f" ({html.escape(hw)})" if hw else "")
                + (f" from {len(prov['runs'])} runs" if prov.get("runs") else "") + ".")
    where = {True: f"<b>Not the committed files:</b> <code>{rel_dir}</code> has changes since the last commit "
                   f"(a local run).",
             False: f"These are the files committed under <code>{rel_dir}</code>",
             None: f"These are the files under <code>{rel_dir}</code>"}[changed]
    if changed is not True:
        where += "; its <code>provenance.json</code> records the runs, corpora and environment."
    notes = "".join(f" Note: {html.escape(str(n))}." for n in prov.get("notes") or [])
    return f'<p class="docs-provenance">{made} {where}{notes}</p>'


def results_html(root: Path, scale: str, art: str, site: Path, href: str, source: str = "",
                 changed: set[str] | None = None) -> str:
    """What a paper page shows of its artifact's results at `scale`: a heading, the provenance line, every figure
    (.png) and table (.md, else a short .csv) under figures/<scale>/<artifact>/, in the order the notebook saves
    them (`source`: its code), each figure and table's .csv copied into the site; or one line saying there are none.
    `changed`: the paths git reports as changed under figures/<scale>/ (None: not known)."""
    d, rel_dir = root / "figures" / scale / art, f"figures/{scale}/{art}/"
    head = f'<h2 id="Results-at-scale-{html.escape(scale)}">Results at scale {html.escape(scale)}</h2>'
    if not d.is_dir():
        return (f'{head}\n<p class="docs-results-none">No results at scale {html.escape(scale)} for this artifact: '
                f'<code>{rel_dir}</code> is not in this checkout (<code>coupled-qk reproduce {html.escape(art)} '
                f'--scale {html.escape(scale)}</code> makes it).</p>')
    try:
        prov = json.loads((d / "provenance.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        prov = {}
    calls = list(dict.fromkeys(SAVE_CALL.findall(source)))
    figs = [n for k, n in calls if k == "figure" and (d / f"{n}.png").is_file()]
    figs += sorted(p.stem for p in d.glob("*.png") if p.stem not in figs)
    tabs = [n for k, n in calls if k == "table" and ((d / f"{n}.md").is_file() or (d / f"{n}.csv").is_file())]
    tabs += sorted({p.stem for p in (*d.glob("*.md"), *d.glob("*.csv"))} - set(tabs))
    dst = site / "figures" / scale / art
    dst.mkdir(parents=True, exist_ok=True)

    def link(name):
        return _rel(href, f"figures/{scale}/{art}/{name}")
    mine = None if changed is None else any(c.startswith(rel_dir) for c in changed)
    parts = [head, provenance_line(prov, scale, rel_dir, mine)]
    for n in figs:
        shutil.copy2(d / f"{n}.png", dst / f"{n}.png")
        parts.append(f'<figure class="docs-figure"><img src="{link(n + ".png")}" alt="figure {html.escape(n)}">'
                     f'<figcaption>Figure <code>{html.escape(n)}</code>, <code>{rel_dir}{html.escape(n)}.png</code>'
                     f'</figcaption></figure>')
    for n in tabs:
        md, csv_file = d / f"{n}.md", d / f"{n}.csv"
        md_text = md.read_text(encoding="utf-8") if md.is_file() else None
        data = ""
        if csv_file.is_file():
            shutil.copy2(csv_file, dst / csv_file.name)
            data = f' <a href="{link(csv_file.name)}">{html.escape(csv_file.name)}</a>'
        if parsed := md_table(md_text) if md_text is not None else None:
            caption, rows, aligns = parsed
            body = table_html(rows, aligns)
        else:                             # only a .csv (a figure's data), or a .md of an empty table (no rows)
            caption = " ".join(md_text.split()) if md_text else ""
            rows = []
            if csv_file.is_file():
                with open(csv_file, newline="", encoding="utf-8") as f:
                    rows = [r for r in csv.reader(f) if r]
            if len(rows) <= 1:
                body = '<p class="docs-caption">(no rows)</p>'
            elif len(rows) - 1 <= CSV_ROWS_SHOWN:
                body = table_html(rows)
            else:
                body = ""
                caption = f"{caption} {len(rows) - 1} rows × {len(rows[0])} columns, not shown here".strip()
        parts.append(f'<div class="docs-result-table" id="table-{html.escape(n)}"><p class="docs-caption">'
                     f'Table <code>{html.escape(n)}</code>: {html.escape(caption) or "(no caption)"}{data}</p>'
                     f'{body}</div>')
    return "\n".join(parts)


def add_results(nb) -> None:
    "The slot for the results, after the notebook's introduction (its first markdown cell, else at the top)."
    j = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
    nb.cells.insert(j, nbformat.v4.new_markdown_cell(f'<div class="{RESULTS_SLOT}"></div>'))


# ---------------------------------------------------------------------------------------------------------------
# The page template: nbconvert's lab template, with every remote script taken out and the local MathJax put in

TEMPLATE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
<script>
window.MathJax = {
  tex: {inlineMath: [['$', '$'], ['\\(', '\\)']], displayMath: [['$$', '$$'], ['\\[', '\\]']],
        processEscapes: true, processEnvironments: true, tags: 'ams'},
  options: {ignoreHtmlClass: 'tex2jax_ignore', processHtmlClass: 'tex2jax_process'},
  svg: {fontCache: 'global'}
};
</script>
<script id="MathJax-script" src="{{ resources.docs.mathjax }}"></script>
{%- endblock html_head_js_mathjax -%}
{%- block html_head_css -%}
<style type="text/css">
.docs-nav { display: flex; gap: 1em; align-items: baseline; justify-content: space-between; flex-wrap: wrap;
  font-family: var(--jp-ui-font-family); font-size: 14px; padding: 8px 12px; margin: 0 0 12px 0;
  border-bottom: 1px solid var(--jp-border-color2); background: var(--jp-layout-color1); }
.docs-nav.bottom { border-top: 1px solid var(--jp-border-color2); border-bottom: none; margin: 24px 0 0 0; }
.docs-nav a { text-decoration: none; }
.docs-nav .prev, .docs-nav .next { flex: 1 1 0; }
.docs-nav .next { text-align: right; }
.docs-nav .here { color: var(--jp-ui-font-color2); }
.docs-note { font-family: var(--jp-ui-font-family); margin: 0 12px 12px 12px; padding: 8px 12px;
  border-left: 4px solid #d9a400; background: #fff8e1; }
.docs-note.executed { border-left-color: #3c8d40; background: #edf7ee; }
.docs-toc li { margin: 2px 0; }
/* Wide tables (results, notebook outputs, markdown) scroll sideways inside their cell instead of being clipped by
   the lab template's fixed-layout cell tables (overflow: hidden): each table is its own scroll box. */
.jp-RenderedHTMLCommon table { display: block; width: max-content; max-width: 100%; overflow-x: auto; }
.docs-provenance { border-left: 4px solid #3c8d40; background: #edf7ee; padding: 6px 10px; }
.docs-results-none { border-left: 4px solid #d9a400; background: #fff8e1; padding: 6px 10px; }
.docs-figure { margin: 12px 0; }
.docs-figure img { max-width: 100%; height: auto; }
.docs-figure figcaption, .docs-caption { font-size: 90%; color: var(--jp-content-font-color2); }
.docs-result-table { margin: 16px 0; }
.jp-RenderedHTMLCommon table.docs-results-table { margin-left: 0; margin-right: 0; }
</style>
{%- endblock html_head_css -%}
{% block body_header %}
{{ super() }}
{{ resources.docs.nav }}
{% for n in resources.docs.notes %}<div class="docs-note {{ n.kind }}">{{ n.html }}</div>{% endfor %}
{% endblock body_header %}
{% block body_footer %}
{{ resources.docs.nav | replace('class="docs-nav"', 'class="docs-nav bottom"') }}
{{ super() }}
{% endblock body_footer %}
"""


def exporter() -> HTMLExporter:
    ex = HTMLExporter(template_name="lab", extra_loaders=[DictLoader({"coupled_qk_docs.html.j2": TEMPLATE})],
                      template_file="coupled_qk_docs.html.j2", exclude_input_prompt=True,
                      exclude_output_prompt=True, anchor_link_text="¶")
    ex.register_preprocessor(NbdevDocs(), enabled=True)
    return ex


def _rel(frm: str, to: str) -> str:
    "The link from page `frm` to `to` (both relative to the site's root)."
    return os.path.relpath(to, os.path.dirname(frm) or ".").replace(os.sep, "/")


def nav(site: list[Page], i: int) -> str:
    here = site[i].href

    def link(p, label):
        return f'<a href="{_rel(here, p.href)}">{html.escape(label)}</a>'

    prev = link(site[i - 1], f"← {site[i - 1].title}") if i > 0 else ""
    nxt = link(site[i + 1], f"{site[i + 1].title} →") if i + 1 < len(site) else ""
    home = f'<a href="{_rel(here, "index.html")}#contents">Contents</a>'
    return (f'<nav class="docs-nav"><span class="prev">{prev}</span><span class="home">{home}</span>'
            f'<span class="next">{nxt}</span></nav>')


def toc(site: list[Page]) -> str:
    "The front page's table of contents, in markdown (rendered with the page), every page in reading order."
    parts = ['<h2 id="contents">Contents</h2>', '']
    for sec, heading in SECTIONS:
        items = [p for p in site[1:] if p.section == sec]
        if items:
            parts.append(f"### {heading}\n")
            parts += [f"{k}. [{p.title}]({p.href})" + (f" — {p.summary}" if p.summary else "") +
                      (f" *(executed at scale {p.executed})*" if p.executed else "") for k, p in enumerate(items, 1)]
            parts.append("")
    return "\n".join(parts)


def add_toc(nb, site: list[Page]) -> None:
    """The table of contents on the front page: after its introduction, before its first `## ` heading (one outside
    a code fence), else at its end."""
    cell = nbformat.v4.new_markdown_cell(toc(site))
    for j, c in enumerate(nb.cells):
        if c.cell_type != "markdown":
            continue
        starts = [m.start() for m in re.finditer(r"^## ", c.source, re.M) if c.source[:m.start()].count("```") % 2 == 0]
        if starts:
            head, tail = c.source[:starts[0]].rstrip("\n"), c.source[starts[0]:]
            nb.cells[j:j + 1] = ([nbformat.v4.new_markdown_cell(head)] if head.strip() else []) + \
                [cell, nbformat.v4.new_markdown_cell(tail)]
            return
    nb.cells.append(cell)


HREF = re.compile(r'href="([^"#:]+\.ipynb)(#[^"]*)?"')


def _fix_links(body: str, page: Page, by_src: dict[Path, str], root: Path) -> str:
    """Links to other notebooks (`x.ipynb`, relative to the notebook or to the repository) point to their pages, and
    GitHub-style anchors (`#the-environment`) to nbconvert's heading ids (`The-environment`)."""
    def sub(m):
        for base in (page.committed.parent, root):
            target = (base / m.group(1)).resolve()
            if target in by_src:
                return f'href="{_rel(page.href, by_src[target])}{m.group(2) or ""}"'
        return m.group(0)
    ids = set(re.findall(r'\bid="([^"]+)"', body))
    lower = {}
    for i in sorted(ids):
        lower.setdefault(i.lower(), i)

    def anchor(m):
        a = m.group(1)
        return m.group(0) if a in ids or a.lower() not in lower else f'href="#{lower[a.lower()]}"'
    return re.sub(r'href="#([^"]+)"', anchor, HREF.sub(sub, body))


def _executed_note(nb, p: Page, root: Path) -> dict:
    "What the note above an executed copy says: which copy, when it was made, and whether it stopped on an error."
    rel = p.src.relative_to(root) if p.src.is_relative_to(root) else p.src
    pm = nb.metadata.get("papermill", {})
    when = f", {pm['end_time'][:16].replace('T', ' ')} UTC" if pm.get("end_time") else ""
    text = (f"Executed at scale <b>{p.executed}</b>: the outputs below are those of "
            f"<code>{html.escape(str(rel))}</code>{when}.")
    if pm.get("exception"):
        return {"kind": "", "html": text + " It stopped with an error, shown where it happened."}
    return {"kind": "executed", "html": text}


def _execute(nb, path: Path):
    from nbconvert.preprocessors import ExecutePreprocessor
    ExecutePreprocessor(timeout=None, kernel_name="python3").preprocess(nb, {"metadata": {"path": str(path.parent)}})


def build(out: Path | str = ROOT / "_docs", root: Path = ROOT, runs_dir: Path | None = None,
          cache: Path = DEFAULT_CACHE, execute: bool = False, scale: str = DEFAULT_SCALE, log=print) -> list[Page]:
    """Write the site into `out` (made if needed): one HTML page per notebook, mathjax/ and figures/; returns the
    pages. The paper pages show the results at `scale` (figures/<scale>/). `execute` runs each chapter before
    rendering it (paper notebooks are `make reproduce`'s to execute: they write figures/)."""
    out, root = Path(out), Path(root)
    t0 = time.time()
    mj = mathjax_dir(cache)
    (out / "mathjax").mkdir(parents=True, exist_ok=True)
    for f in MATHJAX_FILES:                      # mathjax/tex-svg-full.js (MATHJAX_JS) and mathjax/LICENSE
        shutil.copy2(mj / f, out / "mathjax" / Path(f).name)

    site = pages(root, runs_dir, scale)
    changed = _changed(root, scale)
    nbs = {}
    for p in site:
        nbs[p.href] = nbformat.read(p.src, as_version=4)
        p.title, p.summary = _title(nbformat.read(p.committed, as_version=4) if p.executed else nbs[p.href])
        p.title = p.title or p.committed.stem
    by_src = {p.committed.resolve(): p.href for p in site}
    ex = exporter()
    for i, p in enumerate(site):
        nb = nbs[p.href]
        results = None
        if p.section == "paper":
            if p.executed:
                p.notes.append(_executed_note(nb, p, root))
            else:
                other = ("<code>make docs DOCS_SCALE=smoke</code> shows a smoke run's" if scale == DEFAULT_SCALE
                         else f"<code>make docs</code> shows the {DEFAULT_SCALE} results")
                p.notes.append({"kind": "", "html": f"Not executed here: the code below is shown as committed; the "
                                f"results shown are the files its artifact wrote at scale <b>{html.escape(scale)}"
                                f"</b> (<code>make reproduce</code> remakes them; {other})."})
            art = _artifact(p.committed)
            source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
            results = results_html(root, scale, art, out, p.href, source, changed)
            add_results(nb)
        elif p.section == "experiments":
            if p.executed:
                p.notes.append(_executed_note(nb, p, root))
            else:
                p.notes.append({"kind": "", "html": "Shown as committed, not executed here: run it with papermill "
                                "as below to see its outputs."})
        if i == 0:
            add_toc(nb, site)
        if execute and p.section == "" and i > 0:
            log(f"docs: executing {p.committed.relative_to(root)}")
            _execute(nb, p.committed)
        nb.metadata["title"] = p.title if i == 0 else f"{p.title} — coupled_qk"
        resources = {"metadata": {"name": p.title, "path": str(p.committed.parent)},
                     "docs": {"nav": nav(site, i), "notes": p.notes, "mathjax": _rel(p.href, MATHJAX_JS)}}
        body, _ = ex.from_notebook_node(nb, resources=resources)
        if results is not None:
            slot = f'<div class="{RESULTS_SLOT}"></div>'
            if body.count(slot) != 1:
                raise RuntimeError(f"docs: {p.href}: the results slot was not rendered once ({body.count(slot)})")
            body = body.replace(slot, f'<div class="docs-results">\n{results}\n</div>')
        dst = out / p.href
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(_fix_links(body, p, by_src, root), encoding="utf-8")
    n_exec = sum(bool(p.executed) for p in site)
    log(f"docs: {len(site)} pages ({n_exec} from executed copies) in {out} ({time.time() - t0:.0f} s); "
        f"open {out / 'index.html'}")
    return site


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "_docs"), help="the site's folder (default: _docs)")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE), help="where MathJax is kept once fetched (default: .cache/docs)")
    ap.add_argument("--runs-dir", default=None, help="where executed copies are looked for (default: runs_dir setting)")
    ap.add_argument("--scale", default=os.environ.get("DOCS_SCALE") or DEFAULT_SCALE,
                    help="whose results the paper pages show, figures/<scale>/ (default: $DOCS_SCALE, else cpu)")
    ap.add_argument("--execute", action="store_true", help="run each chapter before rendering it")
    a = ap.parse_args(argv)
    try:
        build(a.out, runs_dir=a.runs_dir, cache=Path(a.cache), execute=a.execute, scale=a.scale)
    except MathJaxUnavailable as e:
        sys.exit(f"docs: {e}")


if __name__ == "__main__":
    main()
