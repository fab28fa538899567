"""Trained runs as Hugging Face models, through the command line as a user meets it: a smoke run of every variant
exports with `coupled-qk export` and loads back through `AutoModelForCausalLM` with the native model's logits;
`coupled-qk eval` scores it with lm-evaluation-harness on exactly the run's own test tokens; bad runs are one line.
The chapter nbs/14b_export.ipynb tests the pieces (every variant off its identity, generate, the tokenizers)."""
import contextlib
import io

import pytest

pytest.importorskip("transformers", reason="export needs the hf extra: pip install -e \".[hf]\"")
SMOKE = ["--preset", "smoke", "--corpus", "pydocs", "--device", "cpu", "--quiet", "--max-steps", "2",
         "--batch-size", "4", "--eval-batches", "2", "--eval-every", "0"]


def _run(argv) -> tuple[int, str, str]:
    from coupled_qk.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("COUPLED_QK_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path


def test_every_variant_exports_and_reloads_with_equal_logits_and_eval_agrees(ws):
    import torch
    from transformers import AutoModelForCausalLM
    from coupled_qk.attention import VARIANTS
    from coupled_qk.export import load_run_model
    x = torch.randint(0, 257, (2, 32))
    for v in VARIANTS:
        run = ws / "runs" / v
        assert _run(["train", *SMOKE, "--variant", v, "--out", str(run)])[0] == 0
        rc, out, err = _run(["export", str(run), str(ws / "hf" / v)])
        assert rc == 0 and "wrote" in out, err
        back = AutoModelForCausalLM.from_pretrained(ws / "hf" / v).eval()
        native = load_run_model(run)[0]
        with torch.no_grad():
            assert torch.allclose(back(x).logits, native.gpt(x)[0], rtol=0, atol=1e-5), v
    rc, out, err = _run(["eval", str(ws / "runs" / "hamiltonian")])     # the harness on the run's own test tokens
    assert rc == 0, err
    diff = float(out.split("relative difference ")[1].split(")")[0])
    assert "coupled_qk_pydocs_test" in out and diff < 1e-4, out


def test_bad_runs_are_one_line(ws):
    mqar = ws / "runs" / "mqar"
    assert _run(["mqar", "--task", "easy", "--steps", "2", "--eval-every", "1", "--lrs", "1e-3", "--quiet",
                 "--vocab-size", "64", "--seq-len", "16", "--out", str(mqar)])[0] == 0
    unfinished = ws / "runs" / "cut"
    assert _run(["train", *SMOKE, "--out", str(unfinished)])[0] == 0
    (unfinished / "result.json").unlink()
    (ws / "full").mkdir()
    (ws / "full" / "x").write_text("x")
    for argv, needle in ((["export", str(mqar), str(ws / "o")], "is not a language-model run"),
                         (["export", str(unfinished), str(ws / "o")], "the run is unfinished"),
                         (["export", "lm-nosuch", str(ws / "o")], "no such folder, nor a run id"),
                         (["export", str(ws / "runs" / "cut"), str(ws / "full")], "unfinished"),
                         (["eval", str(mqar)], "is not a language-model run"),
                         (["eval", str(unfinished), "--tasks", "wiki"], "unknown corpus 'wiki'"),
                         (["eval", str(unfinished), "--batch-size", "0"], "--batch-size 0: give 1 or more")):
        rc, out, err = _run(argv)
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and needle in lines[0], (argv, err)
    assert not (ws / "o").exists()


def test_export_under_a_file_is_one_line_and_leaves_nothing(ws):
    "OUT below a file: one line naming the part of the path that is a file and what is expected, exit 2, nothing made."
    run = ws / "runs" / "done"
    assert _run(["train", *SMOKE, "--test-scoring", "prefix", "--out", str(run)])[0] == 0
    (ws / "some_file.txt").write_text("x")
    before = sorted(p.relative_to(ws) for p in ws.rglob("*"))
    for out in ("some_file.txt/out", "some_file.txt/deeper/out"):
        rc, _, err = _run(["export", str(run), str(ws / out)])
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, err
        assert f"{ws / 'some_file.txt'} is a file, not a folder; give a model folder whose parents are folders" in lines[0]
    assert sorted(p.relative_to(ws) for p in ws.rglob("*")) == before
    assert (ws / "some_file.txt").read_text() == "x"
