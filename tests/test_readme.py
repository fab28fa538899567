"""Every Python block of the README runs verbatim, in a fresh namespace, in the order it appears."""
import re

import pytest
from conftest import ROOT

HF_HEADING = "### In a Hugging Face model"


def readme_blocks() -> list[tuple[str, str]]:
    "(the heading above it, the code) for every ```python block of README.md."
    text = (ROOT / "README.md").read_text()
    blocks, heading = [], "(top)"
    for part in re.split(r"(```python\n.*?```)", text, flags=re.S):
        if part.startswith("```python\n"):
            blocks.append((heading, part[len("```python\n"):-3]))
        else:
            heads = re.findall(r"^#+ .*$", part, re.M)
            heading = heads[-1] if heads else heading
    return blocks


BLOCKS = readme_blocks()


def test_readme_has_its_examples():
    "The method's snippet and the Hugging Face example are both there (the README must keep them)."
    headings = [h for h, _ in BLOCKS]
    assert HF_HEADING in headings and any("method" in h for h in headings), headings


@pytest.mark.parametrize("heading,code", BLOCKS, ids=[f"{i}: {h.lstrip('# ')}" for i, (h, _) in enumerate(BLOCKS)])
def test_readme_block_runs(heading, code):
    if "transformers" in code:
        pytest.importorskip("transformers", reason="the example needs the optional extra: pip install -e \".[hf]\"")
    exec(compile(code, f"README.md ({heading})", "exec"), {"__name__": "readme"})


def export_block() -> str:
    "The README's shell block that exports a run (the fenced block holding `coupled-qk export`)."
    blocks, open_ = [], None
    for line in (ROOT / "README.md").read_text().splitlines():
        if open_ is None and line.startswith("```"):
            open_ = []
        elif open_ is not None and line.strip() == "```":
            blocks.append("\n".join(open_))
            open_ = None
        elif open_ is not None:
            open_.append(line)
    found = [b for b in blocks if "coupled-qk export " in b]
    assert len(found) == 1, f"expected one README block with `coupled-qk export`, found {len(found)}"
    return found[0]


def block_commands(block: str) -> tuple[list[list[str]], list[str]]:
    "The block's `coupled-qk` commands as argv lists (a trailing backslash continues a line), and its other lines."
    import shlex
    commands, printed, line = [], [], ""
    for raw in block.splitlines():
        line += raw
        if line.endswith("\\"):
            line = line[:-1]
            continue
        (commands.append(shlex.split(line)) if line.startswith("coupled-qk ") else printed.append(line))
        line = ""
    return commands, printed


def test_readme_export_block_runs_as_printed(tmp_path, monkeypatch):
    """The export block runs as printed, in order, in a fresh folder with a fresh runs folder (the console script's
    `main`, in this process); the run it exports and scores is the one its train line makes, so its ids cannot drift;
    the score it prints is the one the block shows."""
    pytest.importorskip("transformers", reason="export needs the hf extra: pip install -e \".[hf]\"")
    import contextlib
    import io
    from coupled_qk.cli import main
    commands, printed = block_commands(export_block())
    assert [c[:2] for c in commands] == [["coupled-qk", "train"], ["coupled-qk", "export"], ["coupled-qk", "eval"]]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COUPLED_QK_RUNS_DIR", str(tmp_path / "runs"))
    outs = []
    for argv in commands:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv[1:])
        assert rc == 0, (argv, err.getvalue()[-2000:])
        outs.append(out.getvalue())
    made = re.search(r"results in \S*/lm/(lm-[0-9a-f]{12})$", outs[0].strip()).group(1)
    assert commands[1][2] == made and commands[2][2] == made, (made, commands)
    assert (tmp_path / commands[1][3] / "config.json").is_file()
    # the printed score: the same task and tokens, the same perplexity to float32 rounding across machines
    shown, got = printed[0], outs[2].strip().splitlines()[-1]
    number = r"perplexity ([\d.]+) on ([\d,]+) tokens"
    (ppl, n), (ppl_got, n_got) = re.search(number, shown).groups(), re.search(number, got).groups()
    assert shown.split(":")[0] == got.split(":")[0] and n == n_got, (shown, got)
    assert abs(float(ppl_got) / float(ppl) - 1) < 1e-3, (shown, got)


def test_readme_cpu_run_is_the_committed_one():
    "The cpu-scale config the README gives for the committed run makes the run id it names (and that summary exists)."
    from coupled_qk.cli_options import config_from_args, config_parser
    from coupled_qk.runs import run_id
    from coupled_qk.train import TrainConfig
    text = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"summary's `(lm-[0-9a-f]{12})`\) is the same train line with `(--preset cpu [^`]+)`", text)
    assert m, "the README's paragraph on the committed cpu run is not where this test looks"
    cfg = config_from_args(TrainConfig, config_parser(TrainConfig, "readme", "").parse_args(m.group(2).split()))
    assert run_id("lm", cfg) == m.group(1)
    assert (ROOT / "figures" / "cpu" / "runs" / f"{m.group(1)}.json").is_file()
