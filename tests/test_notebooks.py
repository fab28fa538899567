"""Run every chapter notebook's tests through nbdev's `test_nb`, one notebook per pytest test, so the run
ends with pytest's counted line (nbdev-test alone prints "Success." even when it found nothing)."""
from pathlib import Path

import pytest
from conftest import ROOT

# index.ipynb is the README (one markdown cell, no code: tests/test_project.py checks it); nbdev would read its
# bullet list as front matter and warn
CHAPTERS = sorted(p for p in (ROOT / "nbs").glob("*.ipynb") if p.stem != "index")


def test_chapters_found():
    assert len(CHAPTERS) >= 4, f"expected the chapter notebooks in {ROOT/'nbs'}, found {CHAPTERS}"


@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_notebook(nb: Path):
    from nbdev.config import get_config
    from nbdev.test import test_nb

    skip = get_config(ROOT).tst_flags.split()
    ok, secs = test_nb(nb, skip_flags=skip, basepath=str(ROOT))
    assert ok, f"{nb.relative_to(ROOT)} failed; its traceback is in the captured stderr above"
