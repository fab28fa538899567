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
    from coupled_qk.registry import ARTIFACTS

    assert len(ARTIFACTS) == 16
    for a in ARTIFACTS.values():
        assert (ROOT / "nbs" / a.notebook).is_file(), a.notebook


def test_smoke_pipeline_without_shared_data_then_redrawn(tmp_path, monkeypatch):
    """A fresh clone's main job at smoke scale with nothing but the repository: every artifact except GLUE
    (skipped with one line saying how to enable it), then --redraw from the run summaries alone, which must
    reproduce every table byte for byte (a later reproduce that finds its runs done is tested below)."""
    from coupled_qk.registry import ARTIFACTS, plan
    from coupled_qk.runner import reproduce

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("COUPLED_QK_SHARED_DATA_DIR", str(tmp_path / "no-shared-data"))
    monkeypatch.setenv("COUPLED_QK_LOCAL_GLUE", "")
    runs, figs, said = tmp_path / "runs", tmp_path / "figures", []
    wanted = [a for a in ARTIFACTS if a != "finetune"]     # the pretrained model's artifact has a test of its own, below
    rep = reproduce(wanted, scale="smoke", jobs=2, runs_dir=runs, figures_dir=figs, log=said.append)
    assert list(rep.skipped) == ["glue", "drift"] and "local_glue" in rep.skipped["glue"] and rep.skipped["glue"] in said
    assert "scale cpu only" in rep.skipped["drift"]       # drift is measured at cpu scale, on request
    made = [a for a in wanted if a not in ("glue", "drift")]
    n = len(plan(made, "smoke"))
    assert len(rep.executed) == n and not rep.cached and not rep.failed
    assert not (figs / "smoke" / "glue").exists()
    for a in made:
        d = figs / "smoke" / a
        prov = json.loads((d / "provenance.json").read_text())
        assert prov["scale"] == "smoke" and prov["runs"] and prov["git"]
        names = {p.suffix for p in d.iterdir()}
        assert {".png", ".pdf", ".md", ".csv"} <= names, (a, names)
        for f in prov["files"]:
            assert (d / f).is_file(), (a, f)
    assert len(list((figs / "smoke" / "runs").glob("*.json"))) == n
    # no run wrote its metrics twice
    for m in runs.rglob("metrics.jsonl"):
        steps = [(r.get("lr"), r["step"]) for r in map(json.loads, m.read_text().splitlines())]
        assert len(steps) == len(set(steps)), m
    # --redraw with the runs folder gone: nothing trains, and the summaries alone give the same tables
    tables = {p: p.read_bytes() for p in (figs / "smoke").rglob("*.csv")}
    rep2 = reproduce(made, scale="smoke", jobs=2, redraw=True, runs_dir=tmp_path / "empty-runs", figures_dir=figs,
                     log=lambda *a: None)
    assert rep2.executed == [] and len(rep2.cached) == n
    assert {p: p.read_bytes() for p in (figs / "smoke").rglob("*.csv")} == tables
    claims_follow_their_rule(figs / "smoke" / "claims" / "claims.csv")
    ladder_slope_follows_its_rows(figs / "smoke" / "scaling")
    # finishing a regeneration elsewhere: with the runs folder gone and one summary removed, --reuse-committed trains
    # exactly that run and reuses every committed one
    main = plan(["main_table"], "smoke")
    (figs / "smoke" / "runs" / f"{main[0].run_id}.json").unlink()
    rep3 = reproduce(["main_table"], scale="smoke", reuse_committed=True, runs_dir=tmp_path / "other-runs", figures_dir=figs,
                     log=lambda *a: None)
    assert rep3.executed == [main[0].run_id] and len(rep3.cached) == len(main) - 1


@pytest.mark.skipif(not (SHARED / "data" / "glue").exists(), reason="needs the shared GLUE samples (../shared/data)")
def test_glue_artifact_with_shared_samples(tmp_path, monkeypatch):
    from coupled_qk.runner import reproduce

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    rep = reproduce(["glue"], scale="smoke", jobs=2, runs_dir=tmp_path / "runs", figures_dir=tmp_path / "figures",
                    log=lambda *a: None)
    assert not rep.skipped and not rep.failed and (tmp_path / "figures" / "smoke" / "glue" / "provenance.json").is_file()
    # finishing elsewhere with --reuse-committed: the fine-tunes whose summaries are gone need their LM runs' checkpoints,
    # which a committed summary does not hold, so those LM runs train again in the new runs folder, then the fine-tunes
    from coupled_qk.registry import plan
    glue = [r for r in plan(["glue"], "smoke") if r.kind == "glue" and r.needs]
    for r in glue:
        (tmp_path / "figures" / "smoke" / "runs" / f"{r.run_id}.json").unlink()
    rep2 = reproduce(["glue"], scale="smoke", reuse_committed=True, runs_dir=tmp_path / "other-runs",
                     figures_dir=tmp_path / "figures", log=lambda *a: None)
    needed = {n for r in glue for n in r.needs}
    assert not rep2.failed and set(rep2.executed) == needed | {r.run_id for r in glue}, rep2.executed


def test_finetune_artifact_on_the_real_model(tmp_path, monkeypatch):
    """The finetune artifact at smoke scale on the real SmolLM2-135M (from the pinned wheel, cached under data_dir):
    zero-shot, the lr selection, every method on both corpora, the step-cost benchmark, its notebook, and the claims
    table's adaptation family read from it; then --redraw gives the same tables."""
    from coupled_qk.registry import plan
    from coupled_qk.runner import reproduce

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    runs, figs = tmp_path / "runs", tmp_path / "figures"
    rep = reproduce(["finetune", "claims"], scale="smoke", jobs=2, runs_dir=runs, figures_dir=figs, log=lambda *a: None)
    assert not rep.failed and len(rep.executed) == len(plan(["finetune", "claims"], "smoke"))
    d = figs / "smoke" / "finetune"
    for name in ("finetune.csv", "lr_chosen.csv", "power.csv", "step_cost.csv", "learned_dt.csv", "finetune.png"):
        assert (d / name).is_file(), name
    import pandas as pd
    t = pd.read_csv(d / "finetune.csv")
    assert set(t.corpus) == {"pydocs", "debmix"} and set(t.method) == {"zero_shot", "coupling", "lora", "coupling_lora"}
    cost = pd.read_csv(d / "step_cost.csv")
    assert set(cost.method) == {"coupling", "lora", "coupling_lora", "full"}
    claims = pd.read_csv(figs / "smoke" / "claims" / "claims.csv")
    family = claims[claims.place.str.startswith("adaptation")]
    assert len(family) == 3 and (family.n > 0).all(), family[["claim", "place", "n"]]
    claims_follow_their_rule(figs / "smoke" / "claims" / "claims.csv")
    tables = {p: p.read_bytes() for p in d.glob("*.csv")}
    reproduce(["finetune"], scale="smoke", redraw=True, runs_dir=tmp_path / "empty", figures_dir=figs, log=lambda *a: None)
    assert {p: p.read_bytes() for p in d.glob("*.csv")} == tables


def test_make_reproduce_takes_an_artifact_list():
    text = (ROOT / "Makefile").read_text()
    assert "ARTIFACTS" in text and "$(ARTIFACTS)" in text


def test_two_concurrent_reproduces_write_each_run_once(tmp_path):
    """Two `coupled-qk reproduce` processes on one runs folder: each run is trained by one of them (the other
    waits on the run's lock and then finds it finished), no metrics line is written twice, and a later
    reproduce finds everything done."""
    import os, subprocess, sys
    env = dict(os.environ, OMP_NUM_THREADS="1", COUPLED_QK_RUNS_DIR=str(tmp_path / "runs"),
               COUPLED_QK_FIGURES_DIR=str(tmp_path / "figures"))
    cmd = [str(Path(sys.executable).with_name("coupled-qk")), "reproduce", "steps", "--scale", "smoke"]
    procs = [subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
    executed = [int(out.split("executed ")[1].split()[0]) for out, _ in outs]
    n_runs = len(list((tmp_path / "runs" / "lm").iterdir()))
    assert sum(executed) == n_runs, (executed, n_runs)
    for m in (tmp_path / "runs").rglob("metrics.jsonl"):
        steps = [json.loads(line)["step"] for line in m.read_text().splitlines()]
        assert len(steps) == len(set(steps)), m
    again = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "executed 0 runs" in again.stdout, again.stderr[-2000:]


def _committed_scales():
    figs = ROOT / "figures"
    return sorted(d.name for d in figs.iterdir() if (d / "runs").is_dir() and any((d / "runs").glob("*.json"))) \
        if figs.is_dir() else []


def csv_differences(committed: bytes, redrawn: bytes, rtol: float = 1e-9) -> list[str]:
    """The cells in which two CSV tables differ: text exactly, numbers by more than `rtol` relative (nan equals nan),
    so that a redraw may move a number in its last bits (a library computing it in another order) and nothing more."""
    import csv
    import io
    import math
    a, b = (list(csv.reader(io.StringIO(x.decode()))) for x in (committed, redrawn))
    if [len(r) for r in a] != [len(r) for r in b]:
        return [f"shape: {[len(r) for r in a]} rows x cells committed, {[len(r) for r in b]} redrawn"]
    out = []
    for i, (ra, rb) in enumerate(zip(a, b)):
        for j, (x, y) in enumerate(zip(ra, rb)):
            if x == y:
                continue
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                out.append(f"row {i}, column {a[0][j]!r}: {x!r} committed, {y!r} redrawn")
                continue
            if not (math.isclose(fx, fy, rel_tol=rtol, abs_tol=0.0) or (math.isnan(fx) and math.isnan(fy))):
                out.append(f"row {i}, column {a[0][j]!r}: {x} committed, {y} redrawn ({abs(fy / fx - 1) if fx else fy:.2g})")
    return out


def test_csv_differences_can_fail():
    "The comparison sees a changed word, a number moved beyond 1e-9 relative, a changed shape; it lets the last bits go."
    committed = b"claim,p,verdict\nmain,0.012345678901234,reproduced\nglue,nan,inconclusive\n"
    assert csv_differences(committed, committed.replace(b"901234", b"901299")) == []         # 5e-12 relative
    assert len(csv_differences(committed, committed.replace(b"0.0123456", b"0.0123457"))) == 1
    assert len(csv_differences(committed, committed.replace(b"reproduced", b"equivalent"))) == 1
    assert csv_differences(committed, committed + b"extra,1,x\n")[0].startswith("shape")


@pytest.mark.parametrize("scale", _committed_scales() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no committed figures/<scale>/runs/ yet: the cpu scale is regenerated with its run summaries"))])
def test_committed_tables_redraw_identically(scale, tmp_path):
    """A clean clone redraws the committed main table, corpus table and claims table of `scale` from the committed
    run summaries (and the committed benchmark) alone (no runs folder, no training): every markdown table (and so every
    verdict) byte for byte, every CSV number within 1e-9 relative of the committed one. (The claims read every other
    artifact's summaries; `coupled-qk reproduce --redraw` redraws them all, which takes minutes more than this suite has.)"""
    import shutil
    from coupled_qk.runner import reproduce, unavailable
    figs = tmp_path / "figures"
    shutil.copytree(ROOT / "figures" / scale, figs / scale)
    if (ROOT / "figures" / "benchmark").is_dir():        # the claims' equal-wall-clock rows read the committed benchmark
        shutil.copytree(ROOT / "figures" / "benchmark", figs / "benchmark")
    made = [a for a in ("main_table", "corpus", "claims")
            if (ROOT / "figures" / scale / a).is_dir() and a not in unavailable([a], scale)]
    tables = sorted(p.relative_to(figs) for a in made for p in (figs / scale / a).glob("*") if p.suffix in (".csv", ".md"))
    committed = {k: (figs / k).read_bytes() for k in tables}
    from coupled_qk.registry import plan
    planned = {r.run_id for r in plan(made, scale)}
    missing = sorted(planned - {p.stem for p in (figs / scale / "runs").glob("*.json")})
    if missing:                   # the registry holds a design whose runs are still being trained and committed
        pytest.skip(f"figures/{scale} is mid-regeneration: {len(missing)} of {len(planned)} runs the registry plans for "
                    f"{', '.join(made)} have no committed summary yet (e.g. {missing[0]})")
    rep = reproduce(made, scale=scale, jobs=2, redraw=True, runs_dir=tmp_path / "no-runs", figures_dir=figs,
                    log=lambda *a: None)
    assert rep.executed == []
    assert any(k.suffix == ".csv" for k in tables) and any(k.suffix == ".md" for k in tables), tables
    changed = {str(k): ["not redrawn"] if not (figs / k).is_file() else
               csv_differences(committed[k], (figs / k).read_bytes()) if k.suffix == ".csv" else
               ["markdown differs"] if (figs / k).read_bytes() != committed[k] else [] for k in tables}
    changed = {k: v for k, v in changed.items() if v}
    assert not changed, f"--redraw changed {changed}"


def _verdict_by_hand(mean, sd, n, claim, sesoi=2.0):
    """The claims' rule written a second time, from the 95 % t interval alone (scipy only, not coupled_qk.decisions):
    one-sided tests at 0.025 each are the interval excluding a value."""
    import math
    from scipy import stats
    if not (n >= 2 and sd > 1e-12 * abs(mean)):
        return "inconclusive"
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if claim == 0:
        return ("reproduced" if -sesoi < lo and hi < sesoi else
                "not reproduced at this scale" if lo > sesoi or hi < -sesoi else "inconclusive")
    side = -1 if claim == "lower" or (not isinstance(claim, str) and claim < 0) else 1
    toward, away = (hi < 0, lo > 0) if side < 0 else (lo > 0, hi < 0)
    beyond = not isinstance(claim, str) and (lo > claim if side < 0 else hi < claim)   # excludes the paper's effect
    if away:
        return "opposite sign"
    if (isinstance(claim, str) or abs(claim) > sesoi) and -sesoi < lo and hi < sesoi:
        return "equivalent"
    if toward and not beyond:
        return "reproduced"
    return "not reproduced at this scale" if beyond else "inconclusive"


def test_the_rule_written_twice_agrees():
    "stats.decide and the interval-only rule above give the same verdict on many random rows (every branch reached)."
    import numpy as np
    from coupled_qk.decisions import decide
    rng, seen = np.random.default_rng(0), set()
    for i in range(600):
        n = int(rng.integers(3, 12))
        claim = [-6.6, "lower", "higher", 0.0, 5.0, -1.5][i % 6]
        d = rng.normal(rng.uniform(-9, 9), rng.uniform(0.2, 4), n)
        got = decide(d, claim)["verdict"]
        assert got == _verdict_by_hand(d.mean(), d.std(ddof=1), n, claim), (claim, d.round(3).tolist(), got)
        seen.add(got)
    assert seen == {"reproduced", "not reproduced at this scale", "opposite sign", "equivalent", "inconclusive"}


def _rates_by_hand(k_b, n_b, k_a, n_a, alpha=0.05):
    "The success-rate rule from scipy alone: b higher than a by Boschloo's exact test, each side at alpha/2."
    from scipy import stats
    if (k_a == k_b == 0) or (k_a == n_a and k_b == n_b):
        return "not tested in a discriminating regime"
    t = [[k_b, k_a], [n_b - k_b, n_a - k_a]]
    hi, lo = (stats.boschloo_exact(t, alternative=a).pvalue for a in ("greater", "less"))
    return "opposite sign" if lo < alpha / 2 else "reproduced" if hi < alpha / 2 else "inconclusive"


def claims_follow_their_rule(table):
    """Every tested row of a claims table carries the verdict the rule gives its own mean, sd and n; the gate
    closes after the first tested row that was not decided; no exploratory row carries a verdict that claims more."""
    import pandas as pd
    decided = {"reproduced", "not reproduced at this scale", "opposite sign", "equivalent"}
    c = pd.read_csv(table)
    assert c.place.iloc[0] == "primary" and (c.place == "primary").sum() == 1
    is_open = {"hierarchy": True, "adaptation": True, "replication": True, "ladder": True}   # each family its own sequence
    for r in c.itertuples():
        if r.place == "exploratory":
            assert r.verdict in ("exploratory", "not tested in a discriminating regime"), r.claim
            continue
        if r.place == "separate":                  # a success-rate test outside the sequence: Boschloo each way, by hand
            if pd.isna(r.n_b):                     # its on-request runs are not there: nothing decided
                assert r.verdict == "inconclusive" and r.n == 0, (r.claim, r.verdict)
                continue
            assert r.verdict == _rates_by_hand(int(r.k_b), int(r.n_b), int(r.k_a), int(r.n_a)), (r.claim, r.verdict)
            continue
        family = next((f for f in ("adaptation", "replication", "ladder") if r.place.startswith(f)), "hierarchy")
        assert ("gate closed" in r.place) == (not is_open[family]), (r.claim, r.place)
        if not is_open[family]:
            assert r.verdict == "exploratory", r.claim
            continue
        eff = r.paper_effect if r.paper_effect in ("lower", "higher") else float(r.paper_effect)
        if r.unit == "points/decade":              # a slope across sizes: its verdict reads off its interval and TOST p
            side = 1 if eff == "higher" else -1
            lo, hi = sorted((side * r.ci_low, side * r.ci_high))
            assert r.verdict == ("inconclusive" if not r.n or pd.isna(r.ci_low) else "reproduced" if lo > 0 else
                                 "opposite sign" if hi < 0 else "equivalent" if r.p_equiv < 0.025 else "inconclusive"), r.claim
        elif r.verdict != "not tested in a discriminating regime":
            assert r.verdict == _verdict_by_hand(r.ours, r.sd, r.n, eff), (r.claim, r.verdict)
        is_open[family] = r.verdict in decided


def ladder_slope_follows_its_rows(folder):
    """The compute-matched ladder's slope and its interval, recomputed from the per-size rows of ladder.csv by code
    written a second time (weighted least squares in closed form, scipy's t), match its family table: the family's
    slope over every size, and the exploratory one without the smallest size."""
    import pandas as pd
    every = pd.read_csv(folder / "ladder.csv")
    every = every[every.variant == "hamiltonian"]
    family = pd.read_csv(folder / "ladder_family.csv")
    for fam, rows in ((family[family.place.str.startswith("ladder 2")].iloc[0], every),    # the family's slope
                      (family[family.test.str.startswith("sensitivity")].iloc[0],          # and without the smallest
                       every[every["log10 params"] > every["log10 params"].min()])):
        _slope_matches(fam, rows)


def _slope_matches(fam, rows):
    import math
    import numpy as np, pandas as pd
    from scipy import stats
    x, y, w = rows["log10 params"].to_numpy(), rows["mean %"].to_numpy(), (rows.n / rows["sd %"] ** 2).to_numpy()
    assert int(fam.n) == len(x)
    if len(x) < 3:
        assert pd.isna(fam.estimate)
        return
    xw, yw = w @ x / w.sum(), w @ y / w.sum()
    sxx = w @ (x - xw) ** 2
    b = w @ ((x - xw) * (y - yw)) / sxx
    se = math.sqrt(w @ (y - yw - b * (x - xw)) ** 2 / (len(x) - 2) / sxx)
    half = stats.t.ppf(0.975, len(x) - 2) * se
    assert np.allclose([fam.estimate, fam.ci_low, fam.ci_high], [b, b - half, b + half], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("scale", [s for s in _committed_scales() if (ROOT / "figures" / s / "scaling" / "ladder.csv").is_file()])
def test_committed_ladder_slope_follows_its_rows(scale):
    ladder_slope_follows_its_rows(ROOT / "figures" / scale / "scaling")


@pytest.mark.parametrize("scale", [s for s in _committed_scales() if (ROOT / "figures" / s / "claims" / "claims.csv").is_file()])
def test_committed_claims_follow_their_rule(scale):
    claims_follow_their_rule(ROOT / "figures" / scale / "claims" / "claims.csv")


def _git(*args):
    import subprocess
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def _strict(constant):
    raise ValueError(f"{constant} is not JSON")


@pytest.mark.parametrize("scale", _committed_scales())
def test_committed_artifacts_were_drawn_by_one_clean_revision(scale):
    """Every committed artifact of `scale` names, in its provenance.json (strict JSON: no NaN), one and the same clean
    git revision of this repository's history: no table was drawn by a mix of code versions or by uncommitted code."""
    provs = {p.parent.name: json.loads(p.read_text(), parse_constant=_strict)
             for p in sorted((ROOT / "figures" / scale).glob("*/provenance.json"))}
    revs = {a: p["git"] for a, p in provs.items()}
    assert len(set(revs.values())) == 1, f"the artifacts of figures/{scale} name several revisions: {revs}"
    rev = next(iter(revs.values()))
    assert rev != "unknown" and not rev.endswith("+dirty"), rev
    if _git("rev-parse", "--is-shallow-repository").stdout.strip() != "true":
        assert _git("merge-base", "--is-ancestor", rev, "HEAD").returncode == 0, f"{rev} is not in HEAD's history"


# (artifact, the design's file, the marker whose first commit is the design's (None: the commit that added the file),
# the stage of the artifact's runs it pre-registers (None: every run))
PREREGISTERED = [("replication", "nbs/paper/15_replication.ipynb", None, None),
                 ("scaling", "nbs/09a_hierarchy.ipynb", "09ahlad1", "eval")]


@pytest.mark.parametrize("artifact, design, marker, stage", PREREGISTERED, ids=[p[0] for p in PREREGISTERED])
def test_preregistered_runs_were_made_after_their_design(artifact, design, marker, stage):
    """Every committed summary of a pre-registered study's runs names a clean git revision that descends from the
    commit that added the study's design (its notebook, or the chapter cell that sizes it, beside the seeds in the
    scales chapter). The compute-matched ladder's main size is the main table's runs, sized by their own
    pre-registration: they are not the ladder's to check."""
    import json
    from coupled_qk.registry import artifact_runs
    added = _git("log", "--format=%H", *(("-S", marker) if marker else ("--diff-filter=A",)), "--", design).stdout.split()
    if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true" or not added:
        pytest.skip("needs the repository's history (a full clone) and the design's commit")
    main = {r.run_id for r in artifact_runs("main_table", "cpu")}
    ids = [r.run_id for r in artifact_runs(artifact, "cpu") if stage in (None, r.tags.get("stage")) and r.run_id not in main]
    runs = ROOT / "figures" / "cpu" / "runs"
    found = [runs / f"{i}.json" for i in ids if (runs / f"{i}.json").is_file()]
    if stage and not found:
        pytest.skip(f"no {artifact} run of stage {stage} is committed yet")
    assert found, f"no committed summary of {artifact}'s runs"
    for f in found:
        rev = json.loads(f.read_text())["result"]["git_revision"]
        assert not rev.endswith("+dirty"), (f.name, rev)
        assert _git("merge-base", "--is-ancestor", added[-1], rev).returncode == 0, (f.name, rev, added[-1])


def test_ladder_lrs_are_the_rules_choice():
    """Each lr the compute-matched ladder's design names at a size (the scales chapter's `ladder['chosen']`) is what
    the stability rule (`choose_setting`, the lr_sweep's) picks from the committed summaries of that size's whole
    bracket, and it is bracketed: a worse value on each side."""
    from coupled_qk.curves import choose_setting
    from coupled_qk.registry import artifact_runs
    from coupled_qk.results import results
    from coupled_qk.scales import scale_spec

    chosen = scale_spec("cpu").ladder.get("chosen", {})
    if not chosen:
        pytest.skip("no ladder lr chosen at the cpu scale yet")
    df = results("scaling", "cpu", 1.0, ROOT / "figures", missing_ok=True)
    sel = df[df.stage == "lr"]
    planned = [r for r in artifact_runs("scaling", "cpu") if r.tags["stage"] == "lr"]
    for lab, lrs in chosen.items():
        for v, lr in lrs.items():
            g = sel[(sel["size"] == lab) & (sel.variant == v)]
            n = sum(r.tags["size"] == lab and r.config["variant"] == v for r in planned)
            assert len(g) == n > 0, f"{lab} {v}: {len(g)} of the bracket's {n} runs have committed summaries"
            c = choose_setting(g, "lr").iloc[0]
            assert (c.lr, bool(c.bracketed)) == (lr, True), (lab, v, c.lr, c.bracketed, c.grid)
