"""Every Markdown table of the README and of the notebooks' markdown cells renders: markdown-it (the CommonMark parser
with GitHub's table rule) must see a table wherever a block of `|` lines stands, and no row may be ragged."""
import json
import re

import pytest
from conftest import ROOT
from markdown_it import MarkdownIt

MD = MarkdownIt("commonmark").enable("table")


def _cells(line: str) -> int:
    "The cells of one table row: `|` splits, except escaped or inside a code span."
    line = re.sub(r"`[^`]*`", "x", line.strip())
    line = re.sub(r"\\\|", "x", line)
    return len(line.strip("|").split("|"))


def _pipe_blocks(text: str) -> list[tuple[int, int]]:
    "(first, last + 1) line numbers of each run of lines starting with `|`, outside code fences."
    blocks, start, fence = [], None, False
    lines = text.splitlines()
    for i, line in enumerate(lines + [""]):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        piped = not fence and line.lstrip().startswith("|")
        if piped and start is None:
            start = i
        elif not piped and start is not None:
            blocks.append((start, i))
            start = None
    return blocks


def table_problems(text: str) -> list[str]:
    "What keeps a table of `text` from rendering: a block of `|` lines that is no table, or a ragged row."
    lines = text.splitlines()
    tables = {tok.map[0]: tok.map[1] for tok in MD.parse(text) if tok.type == "table_open"}
    problems = []
    for first, end in _pipe_blocks(text):
        if first not in tables:
            problems.append(f"line {first + 1}: `|` lines that render as a paragraph (no |---| separator under the "
                            f"header?): {lines[first][:60]!r}")
            continue
        width = _cells(lines[first])
        for i in range(first, min(end, tables[first])):
            if _cells(lines[i]) != width:
                problems.append(f"line {i + 1}: {_cells(lines[i])} cells where the header has {width}: {lines[i][:60]!r}")
    return problems


def test_the_rule_finds_both_faults():
    good = "| a | b |\n|---|---|\n| 1 | `x|y` |\n"
    assert table_problems(good) == []
    assert "paragraph" in table_problems("| a | b |\n| 1 | 2 |\n")[0]
    assert "3 cells where the header has 2" in table_problems("| a | b |\n|---|---|\n| 1 | 2 | 3 |\n")[0]
    assert table_problems("```\n| not | a table |\n```\n") == []


def markdown_sources() -> list[tuple[str, str]]:
    "(name, text) of the README and of every markdown cell of every notebook."
    out = [("README.md", (ROOT / "README.md").read_text())]
    for nb in sorted((ROOT / "nbs").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        for k, cell in enumerate(json.loads(nb.read_text())["cells"]):
            if cell["cell_type"] == "markdown":
                out.append((f"{nb.relative_to(ROOT)} cell {k}", "".join(cell["source"])))
    return out


@pytest.mark.parametrize("name", ["README.md", "notebooks"])
def test_every_table_renders(name):
    found = [f"{n}, {p}" for n, text in markdown_sources() if (n == "README.md") == (name == "README.md")
             for p in table_problems(text)]
    assert not found, "\n".join(found)


ABSOLUTE = re.compile(r"(?<![\w.])(/work/|/home/|/root/|/tmp/|/Users/|/private/var/|[A-Z]:\\\\)|site-packages")
WARNING = re.compile(r"\b\w*Warning\b:")


def output_problems(nb_path) -> list[str]:
    "Committed outputs of one notebook that show a path of the machine that ran it, a warning or an error."
    problems = []
    for k, cell in enumerate(json.loads(nb_path.read_text())["cells"]):
        for out in cell.get("outputs", []):
            if out["output_type"] == "error":
                problems.append(f"cell {k}: an error output ({out.get('ename')})")
                continue
            data = out.get("data", {})
            text = "".join(out.get("text", "")) + "".join(data.get("text/plain", "")) + "".join(data.get("text/html", ""))
            for what, pat in (("an absolute path", ABSOLUTE), ("a warning", WARNING)):
                if m := pat.search(text):
                    problems.append(f"cell {k}: {what}: {text[max(0, m.start() - 40):m.end() + 40]!r}")
    return problems


def test_the_output_rule_finds_paths_and_warnings(tmp_path):
    nb = tmp_path / "x.ipynb"
    outs = [{"output_type": "stream", "name": "stderr", "text": ["/opt/x/tqdm/auto.py:21: TqdmWarning: IProgress"]},
            {"output_type": "execute_result", "data": {"text/plain": ["PosixPath('/work/main/data')"]}},
            {"output_type": "stream", "name": "stdout", "text": ["data/corpora and 3/tmp/4 are fine"]}]
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": outs}]}))
    found = output_problems(nb)
    assert len(found) == 2 and "a warning" in found[0] and "an absolute path" in found[1], found


def test_committed_outputs_hold_no_machine_paths_or_warnings():
    found = [f"{nb.relative_to(ROOT)}, {p}" for nb in sorted((ROOT / "nbs").rglob("*.ipynb"))
             if ".ipynb_checkpoints" not in nb.parts for p in output_problems(nb)]
    assert not found, "\n".join(found)


def test_committed_run_summaries_name_no_machine_path():
    """Run summaries name a folder by the setting that placed it (`<runs_dir>/lm/<id>`, `<shared_data_dir>/glue`) or
    relative to the project (`calls.portable`), never by the absolute path of the machine that trained them."""
    found = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in sorted((ROOT / "figures").glob("*/runs/*.json"))
             for m in [ABSOLUTE.search(p.read_text())] if m]
    assert not found, "\n".join(found[:10])


def math_problems(text: str) -> list[str]:
    """Inline math a Markdown renderer would break: a line inside `$…$` that starts like a list item (`+ `, `- `,
    `* `, `1. `) becomes a bullet, and the page shows the raw `$` and LaTeX."""
    problems, inside, fence = [], False, False
    for i, line in enumerate(text.splitlines()):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if fence:
            continue
        if inside and re.match(r"([+*-]|\d+[.)])\s", line.lstrip()):
            problems.append(f"line {i + 1}: inside $…$, a line that starts a list: {line.strip()[:60]!r}")
        bare = re.sub(r"`[^`]*`", "", line.replace(r"\$", "")).replace("$$", "")
        if bare.count("$") % 2:
            inside = not inside
    return problems


def test_the_math_rule_finds_a_list_inside_math():
    assert math_problems("so $a = b\n+ c$ holds") and not math_problems("so\n$a = b + c$ holds\n- an item")
    assert not math_problems("$$\na\n+ b\n$$\n") and not math_problems("`$x` and\n- a list")


def test_no_inline_math_breaks_into_a_list():
    found = [f"{n}, {p}" for n, text in markdown_sources() for p in math_problems(text)]
    assert not found, "\n".join(found)
