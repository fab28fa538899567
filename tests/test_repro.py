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

    from coupled_qk.repro import glue_dir_for

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for c in ("pydocs", "pystdlib", "debmix"): prepare(c)
    # GLUE comes from ../shared/data (or local_glue); without either, every other artifact still runs
    artifacts = [a for a in ARTIFACTS if a != "glue" or glue_dir_for("smoke") is not None]
    runs, figs = tmp_path / "runs", tmp_path / "figures"
    rep = reproduce(artifacts, scale="smoke", jobs=2, runs_dir=runs, figures_dir=figs, log=lambda *a: None)
    n = len(plan(artifacts, "smoke"))
    assert len(rep.executed) == n and not rep.cached and not rep.failed
    for a in artifacts:
        d = figs / "smoke" / a
        prov = json.loads((d / "provenance.json").read_text())
        assert prov["scale"] == "smoke" and prov["runs"] and prov["git"]
        names = {p.suffix for p in d.iterdir()}
        assert {".png", ".pdf", ".md", ".csv"} <= names, (a, names)
        for f in prov["files"]: assert (d / f).is_file(), (a, f)
    assert len(list((figs / "smoke" / "runs").glob("*.json"))) == n
    # again: every run is found by its content hash, nothing trains, the artifacts are redrawn
    rep2 = reproduce(artifacts, scale="smoke", jobs=2, runs_dir=runs, figures_dir=figs, log=lambda *a: None)
    assert rep2.executed == [] and len(rep2.cached) == n


def test_glue_without_data_fails_before_training(monkeypatch, tmp_path):
    from coupled_qk.repro import reproduce_main

    monkeypatch.setenv("COUPLED_QK_SHARED_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("COUPLED_QK_RUNS_DIR", str(tmp_path / "runs"))
    with pytest.raises(SystemExit) as e:
        reproduce_main(["glue", "--scale", "smoke"])
    assert e.value.code == 2 and not (tmp_path / "runs").exists()
