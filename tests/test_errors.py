"""Bad input, as a user meets it: every expected failure of every command is one line on stderr and exit
status 2, no traceback, raised before any compute, and no file in the workspace is lost or changed.

Each case runs `coupled-qk ARGS` in this process (the same `cli.main` the console script calls) inside a
workspace whose runs, figures and settings live in a temporary folder; the prepared corpora are the project's.
"""
import sys
from pathlib import Path

import pytest
from conftest import ROOT, one_line_refusal

SMOKE = ["--preset", "smoke", "--corpus", "pydocs", "--device", "cpu", "--quiet"]


def _run_with_ckpt(ws: Path, payload) -> Path:
    "A run folder whose ckpt.pt holds `payload` (bytes are written raw, anything else through torch.save)."
    import torch
    out = ws / "runs" / "victim"
    out.mkdir(parents=True)
    if isinstance(payload, bytes): (out / "ckpt.pt").write_bytes(payload)
    else: torch.save(payload, out / "ckpt.pt")
    return out


class Foreign:
    "A pickled object that torch.load(weights_only=True) must refuse (loading it would run code)."


def _truncated(ws):
    import torch
    from coupled_qk.runs import save_checkpoint
    out = ws / "runs" / "victim"
    out.mkdir(parents=True)
    save_checkpoint(out / "ckpt.pt", dict(config_hash="x", step=1, model={"w": torch.zeros(1000)}))
    data = (out / "ckpt.pt").read_bytes()
    (out / "ckpt.pt").write_bytes(data[: len(data) // 2])
    return ["train", *SMOKE, "--max-steps", "2", "--out", str(out), "--resume"]


def _other_run(ws):
    out = _run_with_ckpt(ws, dict(config_hash="0" * 64, step=1, world_size=1, model={}, optimizer={}))
    return ["train", *SMOKE, "--max-steps", "2", "--out", str(out), "--resume"]


def _settings(text):
    def setup(ws):
        (ws / "settings.ini").write_text(text)
        return ["train", *SMOKE, "--max-steps", "1"]
    return setup


def _holds_run(ws):
    out = _run_with_ckpt(ws, {"config_hash": "x"})
    return ["train", *SMOKE, "--max-steps", "1", "--out", str(out)]


def _tiny_corpus(ws):
    f = ws / "tiny.txt"
    f.write_text("\n".join(f"line {i} of a very small corpus" for i in range(3)))
    return ["data", "prepare", f"tiny={f}"]


def _lm_without_checkpoint(ws):
    "A language-model run folder with its config and no checkpoint: a GLUE run cannot start from it."
    import json
    from coupled_qk.train import TrainConfig
    from dataclasses import asdict
    lm = ws / "lm-run"
    lm.mkdir()
    (lm / "config.json").write_text(json.dumps(dict(config=asdict(TrainConfig(max_steps=1)))))
    return ["glue", "--task", "sst2", "--run", str(lm), "--max-train", "8", "--out", str(ws / "runs" / "g")]


def _file_as_folder(ws):
    (ws / "afile").write_text("not a folder")
    return ["train", *SMOKE, "--max-steps", "1", "--out", str(ws / "afile" / "run")]


# (id, argv or setup(ws) -> argv, environment overrides, text the line must contain)
CASES = [
    ("unknown-command", ["trian"], {}, "valid: data, train"),
    ("variant", ["train", *SMOKE, "--variant", "coupled"], {}, "valid: standard, hamiltonian"),
    ("preset", ["train", "--preset", "tiny"], {}, "valid: smoke, cpu"),
    ("corpus", ["train", "--corpus", "wikipedia"], {}, "valid: pydocs, pystdlib, debmix"),
    ("tokenizer", ["train", "--tokenizer", "sentencepiece"], {}, "bpe-N"),
    ("int-type", ["train", "--max-steps", "x"], {}, "invalid int value"),
    ("unknown-option", ["train", "--bogus"], {}, "unrecognized arguments"),
    ("two-budgets", ["train", "--max-steps", "1", "--max-tokens", "5"], {}, "one budget, not both"),
    ("lr", ["train", "--lr", "0"], {}, "--lr 0.0; it must be > 0"),
    ("batch", ["train", "--batch-size", "0"], {}, "--batch-size 0"),
    ("heads", ["train", "--n-heads", "3"], {}, "divisible"),
    ("positional", ["train", "--positional", "alibi"], {}, "valid:"),
    ("dtype", ["train", "--dtype", "float16"], {}, "valid: auto, float32, bfloat16"),
    ("no-cuda", ["train", "--device", "cuda", "--max-steps", "1"], {}, "CUDA is not available"),
    ("no-such-device", ["train", "--device", "tpu9", "--max-steps", "1"], {}, "not a torch device"),
    ("device-setting", ["train", "--max-steps", "1"], {"COUPLED_QK_DEVICE": "cuda"}, "CUDA is not available"),
    ("seq-len-too-long", ["train", *SMOKE, "--seq-len", "5000000", "--max-steps", "1"], {},
     "fewer than seq_len + 1"),
    ("resume-nothing", lambda ws: ["train", *SMOKE, "--max-steps", "1", "--out", str(ws / "runs" / "new"), "--resume"],
     {}, "holds no run"),
    ("resume-and-overwrite", lambda ws: ["train", *SMOKE, "--max-steps", "1", "--out", str(ws / "r"), "--resume",
                                         "--overwrite"], {}, "give one"),
    ("holds-a-run", _holds_run, {}, "already holds a run"),
    ("truncated-checkpoint", _truncated, {}, "not a readable checkpoint"),
    ("foreign-checkpoint", lambda ws: ["train", *SMOKE, "--max-steps", "1", "--resume", "--out",
                                       str(_run_with_ckpt(ws, {"x": Foreign()}))], {}, "not a readable checkpoint"),
    ("not-a-dict-checkpoint", lambda ws: ["train", *SMOKE, "--max-steps", "1", "--resume", "--out",
                                          str(_run_with_ckpt(ws, [1, 2, 3]))], {}, "not a checkpoint of this project"),
    ("other-run-checkpoint", _other_run, {}, "belongs to another run"),
    ("out-under-a-file", _file_as_folder, {}, "afile is a file; set runs_dir"),
    ("settings-no-header", _settings("data_dir = x\n"), {}, "not a valid settings file"),
    ("settings-bad-line", _settings("[coupled_qk]\ndata_dir = x\nthis is not a setting\n"), {},
     "settings.ini, line 3: 'this is not a setting' is not a valid settings file line"),
    ("settings-no-section", _settings("[paths]\ndata_dir = x\n"), {}, "no [coupled_qk] section"),
    ("settings-unknown-key", _settings("[coupled_qk]\ndata_dri = x\n"), {}, "valid keys"),
    ("settings-scale", _settings("[coupled_qk]\ndefault_scale = huge\n"), {}, "valid: smoke, cpu, paper"),
    ("mqar-task", ["mqar", "--task", "trivial"], {}, "valid: easy, medium, hard"),
    ("mqar-lrs", ["mqar", "--lrs", "-1"], {}, "positive, finite learning rates"),
    ("mqar-heads", ["mqar", "--n-heads", "3"], {}, "divisible"),
    ("glue-task", ["glue", "--task", "cola", "--init", "scratch"], {}, "valid: sst2, mnli, qnli"),
    ("glue-needs-run", ["glue", "--task", "sst2"], {}, "needs --run DIR"),
    ("glue-run-missing", ["glue", "--task", "sst2", "--run", "/no/such/run"], {}, "not a training run directory"),
    ("data-corpus", ["data", "prepare", "nosuch"], {}, "valid: pydocs"),
    ("data-path", ["data", "prepare", "/no/such/corpus.txt"], {}, "does not exist"),
    ("data-too-small", _tiny_corpus, {}, "would be empty"),
    ("reproduce-artifact", ["reproduce", "table9"], {}, "valid: main_table"),
    ("reproduce-scale", ["reproduce", "--scale", "huge"], {}, "valid: smoke, cpu, paper"),
    ("reproduce-jobs", ["reproduce", "--jobs", "0"], {}, "give 1 or more"),
    ("reproduce-list-alone", ["reproduce", "--list"], {}, "--list goes with --dry-run"),
    ("reproduce-budget", ["reproduce", "--budget", "-1"], {}, "positive, finite multiplier"),
    ("bench-shape", ["bench", "--shapes", "nosuch"], {}, "valid: smoke, cpu"),
    ("bench-bf16-on-cpu", ["bench", "--shapes", "cpu", "--modes", "bf16"], {}, "measured on CUDA only"),
    ("reproduce-redraw-nothing", ["reproduce", "steps", "--scale", "smoke", "--redraw"], {}, "--redraw"),
    # numbers outside their domain, field by field
    ("dt-init-nan", ["train", *SMOKE, "--variant", "hamiltonian", "--dt-init", "nan", "--max-steps", "1"], {},
     "--dt-init nan: give a finite number"),
    ("dt-init-negative", ["train", *SMOKE, "--dt-init", "-0.1", "--max-steps", "1"], {}, "--dt-init -0.1; it must be >= 0"),
    ("seq-len-zero", ["train", *SMOKE, "--seq-len", "0", "--max-steps", "1"], {}, "--seq-len 0; it must be at least 1"),
    ("d-model-zero", ["train", *SMOKE, "--d-model", "0", "--max-steps", "1"], {}, "--d-model 0; it must be at least 1"),
    ("odd-head-dim-rope", ["train", *SMOKE, "--d-model", "66", "--n-heads", "2", "--max-steps", "1"], {},
     "need an even head dim"),
    ("lr-inf", ["train", *SMOKE, "--lr", "inf", "--max-steps", "1"], {}, "--lr inf: give a finite number"),
    ("min-lr-above-lr", ["train", *SMOKE, "--lr", "1e-3", "--min-lr", "1e-2", "--max-steps", "1"], {}, "above --lr"),
    ("dropout-one", ["train", *SMOKE, "--dropout", "1", "--max-steps", "1"], {}, "--dropout 1.0; it must be at most"),
    ("mqar-warmup", ["mqar", "--warmup-frac", "2"], {}, "--warmup-frac 2.0"),
    ("mqar-dt-nan", ["mqar", "--variant", "hamiltonian", "--dt-init", "nan"], {}, "--dt-init nan: give a finite number"),
    ("mqar-lrs-nan", ["mqar", "--lrs", "nan"], {}, "--lrs [nan]: give a finite number"),
    ("glue-lr-nan", ["glue", "--task", "sst2", "--init", "scratch", "--lr", "nan"], {}, "--lr nan: give a finite"),
    ("glue-warmup", ["glue", "--task", "sst2", "--init", "scratch", "--warmup-frac", "1.5"], {}, "--warmup-frac 1.5"),
    ("reproduce-budget-inf", ["reproduce", "--budget", "inf"], {}, "positive, finite multiplier"),
    ("reproduce-budget-nan", ["reproduce", "--budget", "nan"], {}, "positive, finite multiplier"),
    # sizes that cannot work
    ("bpe-too-large", ["train", *SMOKE, "--tokenizer", "bpe-10000000", "--max-steps", "1"], {}, "258 to 65,536 tokens"),
    ("max-tokens-under-a-batch", ["train", *SMOKE, "--max-tokens", "10"], {}, "less than one optimiser step"),
    ("batch-larger-than-split", ["train", *SMOKE, "--batch-size", "200000", "--max-steps", "1"], {},
     "more than the whole"),
    # settings
    ("misspelled-variable", ["train", *SMOKE, "--max-steps", "1"], {"COUPLED_QK_DEVCE": "cuda"},
     "unknown environment variable(s) COUPLED_QK_DEVCE"),
    ("slurm-setting", ["reproduce", "steps", "--scale", "smoke", "--executor", "slurm"], {"COUPLED_QK_SLURM_MEM_GB": "lots"},
     "slurm_mem_gb='lots'"),
    ("executor-choice", ["reproduce", "--executor", "sge"], {}, "invalid choice: 'sge'"),
    ("glue-from-run-without-checkpoint", _lm_without_checkpoint, {"COUPLED_QK_LOCAL_GLUE": str(ROOT / "no-glue")},
     "does not exist"),
    ("data-dir-under-a-file", ["data", "prepare", "pydocs"], {"COUPLED_QK_DATA_DIR": str(ROOT / "README.md" / "data")},
     "set data_dir in settings.ini"),
    ("figures-dir-under-a-file", ["reproduce", "steps", "--scale", "smoke"],
     {"COUPLED_QK_FIGURES_DIR": str(ROOT / "README.md" / "figures")}, "set figures_dir in settings.ini"),
    ("bench-repeats", ["bench", "--shapes", "smoke", "--repeats", "0"], {}, "--repeats 0; it must be at least 1"),
    ("bench-batch", ["bench", "--shapes", "smoke", "--batch", "0"], {}, "--batch 0; it must be at least 1"),
    ("data-tokenizer-first", ["data", "prepare", "pydocs", "--tokenizer", "bpe-5"], {}, "258 to 65,536 tokens"),
    # "no Slurm here" by the environment the case makes (a PATH without sbatch), whatever the machine has
    ("no-slurm-here", ["reproduce", "steps", "--scale", "smoke", "--executor", "slurm"],
     {"PATH": str(Path(sys.executable).parent)}, "this machine has no Slurm"),
    ("slurm-gpus-negative", ["reproduce", "steps", "--scale", "smoke", "--executor", "slurm"],
     {"COUPLED_QK_SLURM_GPUS_PER_RUN": "-1"}, "slurm_gpus_per_run='-1': give a whole number >= 0"),
    ("slurm-array-parallelism", ["reproduce", "steps", "--scale", "smoke", "--executor", "slurm"],
     {"COUPLED_QK_SLURM_ARRAY_PARALLELISM": "0"}, "slurm_array_parallelism='0'"),
]


def _snapshot(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line(case, tmp_path, monkeypatch):
    from coupled_qk.cli import main
    name, argv, env, needle = case
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)                    # settings.ini, if the case writes one, is this workspace's
    for k, v in {"COUPLED_QK_RUNS_DIR": str(ws / "runs"), "COUPLED_QK_FIGURES_DIR": str(ws / "figures"),
                 "COUPLED_QK_DATA_DIR": str(ROOT / "data"), **env}.items():
        monkeypatch.setenv(k, v)
    argv = argv(ws) if callable(argv) else argv
    before = _snapshot(ws)
    line = one_line_refusal(main, argv)
    assert needle in line, line
    assert line.count("coupled-qk") <= 2, line          # the command named once (and maybe its --help)
    assert _snapshot(ws) == before, "a bad input changed or removed files"


def test_the_table_is_long_enough():
    assert len(CASES) >= 60


@pytest.mark.parametrize("params, needle", [
    ({"config": {"preset": "smoke", "max_steps": "abc"}}, "max_steps='abc': give a whole number"),
    ({"config": {"preset": "smoke", "max_stpes": 2}}, "unknown TrainConfig field(s) max_stpes in config"),
    ({"config": {"preset": "smoke", "max_steps": 2}, "n_steps": "abc"}, "n_steps given as notebook parameter(s)"),
], ids=["wrong-type", "unknown-field", "field-beside-config"])
def test_experiment_notebook_parameters_are_checked(params, needle, tmp_path):
    "papermill parameters of the wrong type or name fail in the notebook's first config cell, in one line."
    import papermill as pm
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(ROOT / "nbs" / "experiments" / "lm.ipynb"), str(tmp_path / "out.ipynb"),
                            parameters=dict(params, out_dir=str(tmp_path / "run")), cwd=str(ROOT / "nbs"),
                            progress_bar=False, kernel_name="python3")
    assert e.value.ename == "ConfigError" and needle in e.value.evalue and "\n" not in e.value.evalue, e.value.evalue
    assert not (tmp_path / "run").exists()


def _wikitext_fixture(folder: Path, splits=("valid", "test"), crlf=True, bom=True):
    "A WikiText-layout folder: ` = Title = ` headings, space-only lines between paragraphs, <unk>, CRLF, a BOM."
    import random
    rng = random.Random(0)
    words = "the of and in to a was is for on as by with <unk> at from his an were are which".split()
    folder.mkdir(parents=True)
    for split in splits:
        lines = []
        for i in range(120):
            lines += [" ", f" = Article {i} = ", " "]
            for _ in range(3):
                lines += [" " + " ".join(rng.choice(words) for _ in range(40)) + " . ", " "]
        nl = "\r\n" if crlf else "\n"
        (folder / f"wiki.{split}.tokens").write_text(("\ufeff" if bom else "") + nl.join(lines) + nl, encoding="utf-8",
                                                     newline="")
    return folder


def test_wikitext_and_ptb_layouts_train_through_every_entry_point(tmp_path, monkeypatch, capsys):
    """A WikiText-2 valid/test folder (space-only lines, <unk>, CRLF, BOM) is read the same way by `data prepare
    PATH` and `train --corpus PATH`: paragraphs are documents (whitespace-only lines are blank in the mode choice and
    in the split alike), and the byte-order mark is gone. A PTB-layout file (a sentence a line, no blank line) has
    one document per line; a JSON-lines file whose rows lack the text field says how many it left out."""
    from coupled_qk.cli import main
    from coupled_qk.corpora import load_corpus
    monkeypatch.setenv("COUPLED_QK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COUPLED_QK_RUNS_DIR", str(tmp_path / "runs"))
    wt = _wikitext_fixture(tmp_path / "wikitext-2")
    assert main(["data", "prepare", str(wt)]) == 0
    assert main(["train", "--corpus", str(wt), "--max-steps", "2", "--batch-size", "4", "--quiet"]) == 0
    c = load_corpus(str(wt))
    docs = [d for s in ("train", "validation", "test") for d in c[s]]
    assert len(docs) > 500 and not any("\ufeff" in d or "\r" in d for d in docs)
    assert any(d.strip().startswith("= Article") for d in docs)
    ptb = tmp_path / "ptb.train.txt"
    ptb.write_text("\n".join(f" the <unk> sentence number {i} of a treebank " for i in range(900)) + "\n")
    assert len([d for s in ("train", "validation", "test") for d in load_corpus(f"ptb={ptb}")[s]]) == 900
    j = tmp_path / "half.jsonl"
    j.write_text("".join(('{"text": "row %d has text"}\n' % i) if i % 2 else ('{"title": "row %d"}\n' % i) for i in range(800)))
    capsys.readouterr()
    load_corpus(f"half={j}")
    err = capsys.readouterr().err
    assert "400 of 800 rows have no 'text' field and were left out" in err, err


def test_corrupt_token_cache_is_rebuilt_not_trusted(tmp_path, monkeypatch, capsys):
    "A token cache that no longer matches its manifest (here: truncated) is rebuilt, with one line saying so."
    import numpy as np
    from coupled_qk.tokens import token_cache
    monkeypatch.setenv("COUPLED_QK_DATA_DIR", str(tmp_path / "data"))
    f = tmp_path / "c.txt"
    f.write_text("\n".join(f"document {i}: some text to tokenize" for i in range(800)))
    good = np.array(token_cache(f"c={f}", "bytes", "train"))
    path = next((tmp_path / "data" / "tokens").rglob("train.bin"))
    path.write_bytes(path.read_bytes()[:2000])
    from coupled_qk import documents
    documents.file_sha256.cache_clear()
    again = np.array(token_cache(f"c={f}", "bytes", "train"))
    assert (again == good).all()
    err = capsys.readouterr().err
    assert "holds 2,000 bytes where its manifest says" in err and "rebuilding it" in err, err
