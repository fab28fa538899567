"""Every chapter notebook runs top to bottom under papermill (which ignores nbdev's skip flags)."""
from pathlib import Path

import pytest
from conftest import ROOT

CHAPTERS = sorted((ROOT / "nbs").glob("*.ipynb"))


@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_papermill_runs(nb: Path, tmp_path):
    import papermill as pm

    pm.execute_notebook(str(nb), str(tmp_path / nb.name), cwd=str(nb.parent), kernel_name="python3",
                        progress_bar=False, log_output=False)
