"""The whole pipeline at smoke scale, every artifact, from empty caches; then again, training nothing."""
import json
from pathlib import Path

import pytest
from conftest import ROOT

PAPER_NBS = sorted((ROOT / "nbs" / "paper").glob("*.ipynb"))


@pytest.mark.parametrize("nb", PAPER_NBS, ids=[p.stem for p in PAPER_NBS])
def test_artifact_notebook_has_parameters(nb):
    import nbformat
    import papermill as pm
    from coupled_qk.repro import parameter_names

    cells = [c for c in nbformat.read(str(nb), 4).cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{nb.name}: expected one cell tagged `parameters`"
    assert "scale" in pm.inspect_notebook(str(nb)), f"papermill does not see `scale` in {nb.name}"
    assert {"scale", "budget", "figures_dir"} <= parameter_names(nb)


def test_every_artifact_has_a_notebook():
    from coupled_qk.repro import ARTIFACTS

    assert len(ARTIFACTS) == 10
    for a in ARTIFACTS.values(): assert (ROOT / "nbs" / a.notebook).is_file(), a.notebook


def test_smoke_pipeline_then_cached(tmp_path, monkeypatch):
    from coupled_qk.data import prepare
    from coupled_qk.repro import ARTIFACTS, plan, reproduce

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for c in ("pydocs", "pystdlib", "debmix"): prepare(c)
    runs, figs = tmp_path / "runs", tmp_path / "figures"
    rep = reproduce(scale="smoke", jobs=2, runs_dir=runs, figures_dir=figs, log=lambda *a: None)
    n = len(plan(ARTIFACTS, "smoke"))
    assert len(rep.executed) == n and not rep.cached and not rep.failed
    for a in ARTIFACTS:
        d = figs / "smoke" / a
        prov = json.loads((d / "provenance.json").read_text())
        assert prov["scale"] == "smoke" and prov["runs"] and prov["git"]
        names = {p.suffix for p in d.iterdir()}
        assert {".png", ".pdf", ".md", ".csv"} <= names, (a, names)
        for f in prov["files"]: assert (d / f).is_file(), (a, f)
    assert len(list((figs / "smoke" / "runs").glob("*.json"))) == n
    # again: every run is found by its content hash, nothing trains, the artifacts are redrawn
    rep2 = reproduce(scale="smoke", jobs=2, runs_dir=runs, figures_dir=figs, log=lambda *a: None)
    assert rep2.executed == [] and len(rep2.cached) == n
