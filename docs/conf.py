"""Sphinx configuration of the docs site (`make docs`): myst-nb renders nbs/ as committed, never executing a notebook.

    sphinx-build -c docs nbs _docs          # the source folder is nbs/; this folder holds only the configuration

Reading order: the front page (nbs/index.ipynb, written from README.md by `make index`), then the chapters
(nbs/*.ipynb), the paper notebooks (nbs/paper/) and the experiments (nbs/experiments/), each in file-name order.
A paper notebook is committed without outputs: its page shows the figures and tables its artifact wrote under
figures/<DOCS_SCALE>/<artifact>/ (default cpu: the committed results), with the code revision that made them.
Everything is served from the site itself: MathJax 3 from the locked wheel django-static-mathjax, furo's own assets.
"""
import json
import os
import re
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCALE = os.environ.get("DOCS_SCALE") or "cpu"

project = "coupled_qk"
html_title = "coupled_qk"
extensions = ["myst_nb"]
exclude_patterns = ["**/.ipynb_checkpoints"]
html_theme = "furo"
html_show_sourcelink = False
html_copy_source = False

nb_execution_mode = "off"           # the committed outputs are the results
nb_ipywidgets_js = {}               # no require.js or widget scripts from a CDN
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_dmath_double_inline = True     # $$...$$ inside a paragraph or list item, as the chapters write it
myst_heading_anchors = 3            # GitHub-style anchors (#the-environment), as the README links them

# Copied into _static/: MathJax's single-file SVG build (no font files to fetch) with its licence, and site.css.
_MATHJAX = Path(metadata.distribution("django-static-mathjax").locate_file("mathjax/static/mathjax"))
html_static_path = [str(_MATHJAX / "es5" / "tex-svg-full.js"), str(_MATHJAX / "LICENSE"), "site.css"]
html_css_files = ["site.css"]
mathjax_path = "tex-svg-full.js"

CONTENTS = "".join(f"\n\n```{{toctree}}\n:caption: {caption}\n:maxdepth: 1\n:glob:\n\n{pattern}\n```"
                   for caption, pattern in (("Chapters", "[0-9]*"), ("Paper", "paper/*"),
                                            ("Experiments", "experiments/*")))
SAVED = re.compile(r"""\.(?:figure|table)\([^"'\n]*?["']([\w.-]+)["']""")   # w.figure(fig, "x"), w.table(df, "y")


def _code(cell):
    "A code cell without nbdev's `#|` lines, or None where it is hidden (`#| hide`, `#| default_exp`) or empty."
    lines = cell["source"].splitlines()
    flags = [x.strip()[2:].strip() for x in lines if x.strip().startswith("#|")]
    if any(f == "hide" or f.startswith(("default_exp", "include: false")) for f in flags):
        return None
    cell["source"] = "\n".join(x for x in lines if not x.strip().startswith("#|")).strip("\n")
    return cell if cell["source"].strip() or cell.get("outputs") else None


def results(docname, nb):
    "A paper page's results at SCALE: provenance, then each figure and table in the order the notebook saves them."
    art = re.sub(r"^\d+[a-z]?_", "", docname.split("/")[-1])
    d, rel = ROOT / "figures" / SCALE / art, f"figures/{SCALE}/{art}/"
    if not d.is_dir():
        return (f"## Results at scale {SCALE}\n\nNo results in this checkout: "
                f"`coupled-qk reproduce {art} --scale {SCALE}` makes `{rel}`.")
    prov = json.loads((d / "provenance.json").read_text()) if (d / "provenance.json").is_file() else {}
    made = (f"Made at scale {prov.get('scale', SCALE)} by coupled_qk {prov.get('coupled_qk', '?')} at code revision "
            f"`{prov.get('git', 'unknown')}` on {prov.get('date', 'a date not recorded')} from "
            f"{len(prov.get('runs') or [])} runs; the files are `{rel}`, as committed or remade by `make reproduce`.")
    order = list(dict.fromkeys(SAVED.findall("\n".join(c["source"] for c in nb["cells"] if c["cell_type"] == "code"))))
    key = {n: i for i, n in enumerate(order)}
    parts = [f"## Results at scale {SCALE}", made]
    for p in sorted(d.glob("*.png"), key=lambda p: (key.get(p.stem, len(key)), p.stem)):
        parts.append(f"![Figure {p.stem}](../../{rel}{p.name})")
    for p in sorted(d.glob("*.md"), key=lambda p: (key.get(p.stem, len(key)), p.stem)):
        caption, _, table = p.read_text(encoding="utf-8").partition("\n\n")
        csv = f" ([csv](../../{rel}{p.stem}.csv))" if p.with_suffix(".csv").is_file() else ""
        body = f"\n\n{table.strip()}" if table.strip() else " (no rows)"
        parts.append(f"**Table `{p.stem}`**{csv}: {caption.strip()}{body}")
    return "\n\n".join(parts)


def _source_read(app, docname, source):
    "Show a notebook as a reader needs it: no nbdev directives, the contents on the front page, results on paper pages."
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    nb = json.loads(source[0])
    for c in nb["cells"]:
        c["source"] = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
    nb["cells"] = [c for c in nb["cells"] if c["cell_type"] != "code" or _code(c) is not None]
    if docname == "index":
        text = nb["cells"][0]["source"]
        heads = [m.start() for m in re.finditer(r"^## ", text, re.M) if text[:m.start()].count("```") % 2 == 0]
        cut = heads[0] if heads else len(text)
        nb["cells"][0]["source"] = text[:cut] + "## Contents" + CONTENTS + "\n\n" + text[cut:]
    elif docname.startswith("paper/"):
        nb["cells"].insert(1, {"cell_type": "markdown", "id": "results", "metadata": {},
                               "source": results(docname, nb)})
    source[0] = json.dumps(nb)


def _outputs_beside_doctrees(app):
    "myst-nb writes the outputs' images beside the site's folder (./jupyter_execute for _docs): keep them in doctrees."
    app.env.mystnb_config = app.env.mystnb_config.copy(output_folder=str(Path(app.doctreedir) / "jupyter_execute"))


def setup(app):
    app.connect("source-read", _source_read)
    app.connect("builder-inited", _outputs_beside_doctrees, priority=900)
