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
