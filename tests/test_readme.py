"""The README's Hugging Face example runs verbatim: the Python block under "### In a Hugging Face model"."""
import re

import pytest
from conftest import ROOT

HEADING = "### In a Hugging Face model"


def readme_hf_block() -> str:
    text = (ROOT / "README.md").read_text()
    assert HEADING in text, f"README.md has no section {HEADING!r}"
    m = re.search(r"```python\n(.*?)```", text.split(HEADING, 1)[1], re.S)
    assert m, f"no ```python block under {HEADING!r} in README.md"
    return m.group(1)


def test_readme_hf_example_runs():
    code = readme_hf_block()         # found even where transformers is absent: the README must keep it
    pytest.importorskip("transformers", reason="the example needs the optional extra: pip install coupled_qk[hf]")
    exec(compile(code, "README.md (In a Hugging Face model)", "exec"), {"__name__": "readme_hf"})
