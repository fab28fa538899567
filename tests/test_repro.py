"""The whole pipeline at smoke scale, every artifact, from empty caches; then again, training nothing."""
import json
from pathlib import Path

import pytest
from conftest import ROOT, SHARED

PAPER_NBS = sorted((ROOT / "nbs" / "paper").glob("*.ipynb"))


@pytest.mark.parametrize("nb", PAPER_NBS, ids=[p.stem for p in PAPER_NBS])
def test_artifact_notebook_has_parameters(nb):
    import nbformat
    import papermill as pm
    cells = [c for c in nbformat.read(str(nb), 4).cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{nb.name}: expected one cell tagged `parameters`"
    assert "scale" in pm.inspect_notebook(str(nb)), f"papermill does not see `scale` in {nb.name}"
    assert {"scale", "budget", "figures_dir"} <= set(pm.inspect_notebook(str(nb)))


def test_every_artifact_has_a_notebook():
    from coupled_qk.repro import ARTIFACTS

    assert len(ARTIFACTS) == 10
    for a in ARTIFACTS.values(): assert (ROOT / "nbs" / a.notebook).is_file(), a.notebook


def test_smoke_pipeline_without_shared_data_then_cached_then_redrawn(tmp_path, monkeypatch):
    """A fresh clone's main job at smoke scale with nothing but the repository: every artifact except GLUE
    (skipped with one line saying how to enable it), then again training nothing, then --redraw from the run
    summaries alone, which must reproduce every table byte for byte."""
    from coupled_qk.repro import ARTIFACTS, plan, reproduce

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("COUPLED_QK_SHARED_DATA_DIR", str(tmp_path / "no-shared-data"))
    monkeypatch.setenv("COUPLED_QK_LOCAL_GLUE", "")
    runs, figs, said = tmp_path / "runs", tmp_path / "figures", []
    rep = reproduce(list(ARTIFACTS), scale="smoke", jobs=2, runs_dir=runs, figures_dir=figs, log=said.append)
    assert list(rep.skipped) == ["glue"] and "local_glue" in rep.skipped["glue"] and rep.skipped["glue"] in said
    made = [a for a in ARTIFACTS if a != "glue"]
    n = len(plan(made, "smoke"))
    assert len(rep.executed) == n and not rep.cached and not rep.failed
    assert not (figs / "smoke" / "glue").exists()
    for a in made:
        d = figs / "smoke" / a
        prov = json.loads((d / "provenance.json").read_text())
        assert prov["scale"] == "smoke" and prov["runs"] and prov["git"]
        names = {p.suffix for p in d.iterdir()}
        assert {".png", ".pdf", ".md", ".csv"} <= names, (a, names)
        for f in prov["files"]: assert (d / f).is_file(), (a, f)
    assert len(list((figs / "smoke" / "runs").glob("*.json"))) == n
    # no run wrote its metrics twice
    for m in runs.rglob("metrics.jsonl"):
        steps = [(r.get("lr"), r["step"]) for r in map(json.loads, m.read_text().splitlines())]
        assert len(steps) == len(set(steps)), m
    # again: every run is found by its identity, nothing trains, the artifacts are redrawn
    rep2 = reproduce(made, scale="smoke", jobs=2, runs_dir=runs, figures_dir=figs, log=lambda *a: None)
    assert rep2.executed == [] and len(rep2.cached) == n
    # --redraw with the runs folder gone: the summaries alone give the same tables
    tables = {p: p.read_bytes() for p in (figs / "smoke").rglob("*.csv")}
    rep3 = reproduce(made, scale="smoke", redraw=True, runs_dir=tmp_path / "empty-runs", figures_dir=figs,
                     log=lambda *a: None)
    assert rep3.executed == [] and len(rep3.cached) == n
    assert {p: p.read_bytes() for p in (figs / "smoke").rglob("*.csv")} == tables


@pytest.mark.skipif(not (SHARED / "data" / "glue").exists(), reason="needs the shared GLUE samples (../shared/data)")
def test_glue_artifact_with_shared_samples(tmp_path, monkeypatch):
    from coupled_qk.repro import reproduce

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    rep = reproduce(["glue"], scale="smoke", jobs=2, runs_dir=tmp_path / "runs", figures_dir=tmp_path / "figures",
                    log=lambda *a: None)
    assert not rep.skipped and not rep.failed and (tmp_path / "figures" / "smoke" / "glue" / "provenance.json").is_file()


def test_make_reproduce_takes_an_artifact_list():
    text = (ROOT / "Makefile").read_text()
    assert "ARTIFACTS" in text and "$(ARTIFACTS)" in text
