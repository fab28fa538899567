"""Nothing half-written is ever used, and nothing is left behind: bad data input and broken state files, as a user
meets them. Every refusal is one line on stderr with exit status 2, no traceback, and leaves the workspace (its
data_dir, runs and figures, folders and locks included) exactly as it was; a state file that can be rebuilt is
rebuilt, with one line saying so. The sibling of tests/test_errors.py for the data path."""
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, one_line_refusal

BIN = str(Path(sys.executable).parent / "coupled-qk")
SMOKE = ["--preset", "smoke", "--device", "cpu", "--quiet", "--max-steps", "1", "--batch-size", "2"]


def _text(ws: Path, name="notes.txt", n=600) -> Path:
    "A local corpus big enough for three non-empty hash splits."
    f = ws / name
    f.write_text("\n\n".join(f"note {i}: " + "words of a note " * (i % 7 + 1) for i in range(n)))
    return f


def _rows(ws: Path, bad: str) -> Path:
    f = ws / "rows.jsonl"
    f.write_text("".join(json.dumps({"text": f"row {i} is fine"}) + "\n" for i in range(40)) + bad + "\n")
    return f


def _latin1(ws: Path) -> Path:
    f = ws / "latin1.txt"
    f.write_bytes(("première ligne\n\n" * 50 + "déjà vu\n").encode("latin-1"))
    return f


def _binary(ws: Path) -> Path:
    f = ws / "lib.txt"                           # a shared library named .txt
    f.write_bytes(Path(sys.executable).resolve().read_bytes()[:200_000])
    return f


# (id, setup(ws) -> argv, environment overrides, text the line must contain)
CASES = [
    ("escaping-name", lambda ws: ["data", "prepare", f"../../../escaped={_text(ws)}"], {}, "is not a plain name"),
    ("empty-name", lambda ws: ["data", "prepare", f"={_text(ws)}"], {}, "is not a plain name"),
    ("shadowing-name", lambda ws: ["data", "prepare", f"pydocs={_text(ws)}"], {}, "'pydocs' is an embedded corpus"),
    ("shadowing-name-train", lambda ws: ["train", *SMOKE, "--corpus", f"pydocs={_text(ws)}"], {},
     "'pydocs' is an embedded corpus"),
    ("no-path", lambda ws: ["data", "prepare", "mine="], {}, "no path after '='"),
    ("version-missing", lambda ws: ["train", *SMOKE, "--corpus", "pydocs@"], {}, "names no version"),
    ("binary-as-text", lambda ws: ["data", "prepare", f"lib={_binary(ws)}"], {}, "a binary file, not text"),
    ("binary-train", lambda ws: ["train", *SMOKE, "--corpus", str(_binary(ws))], {}, "a binary file, not text"),
    ("latin1", lambda ws: ["data", "prepare", str(_latin1(ws))], {}, "not UTF-8 text (line 1, byte 5: 0xe8)"),
    ("jsonl-number", lambda ws: ["data", "prepare", str(_rows(ws, '{"text": 7}'))], {}, "line 41: its 'text' is int"),
    ("jsonl-null", lambda ws: ["data", "prepare", str(_rows(ws, '{"text": null}'))], {}, "line 41: its 'text' is null"),
    ("jsonl-list", lambda ws: ["data", "prepare", str(_rows(ws, '{"text": ["a"]}'))], {}, "its 'text' is list"),
    ("jsonl-mixed", lambda ws: ["data", "prepare", str(_rows(ws, '"just a string"'))], {}, "line 41 is a JSON str"),
    ("jsonl-torn", lambda ws: ["data", "prepare", str(_rows(ws, '{"text": "cut mid'))], {}, "line 41 is not JSON"),
    ("hub-unreachable", lambda ws: ["data", "prepare", "wikitext103"],
     {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "COUPLED_QK_LOCAL_WIKITEXT103": ""}, "COUPLED_QK_LOCAL_WIKITEXT103"),
    ("glue-without-data", lambda ws: ["glue", "--task", "sst2", "--init", "scratch", "--preset", "smoke", "--quiet"],
     {"COUPLED_QK_LOCAL_GLUE": "", "COUPLED_QK_SHARED_DATA_DIR": "", "HF_HUB_OFFLINE": "1"}, "COUPLED_QK_LOCAL_GLUE"),
    ("gpt2-offline", lambda ws: ["data", "prepare", str(_text(ws)), "--tokenizer", "gpt2"],
     {"COUPLED_QK_GPT2_DIR": ""}, "set gpt2_dir in settings.ini or COUPLED_QK_GPT2_DIR"),
    ("out-is-a-file", lambda ws: (ws / "afile").write_text("x") and ["train", *SMOKE, "--corpus", "pydocs",
                                                                       "--out", str(ws / "afile")], {}, "is a file; give a folder"),
    ("mqar-out-is-a-file", lambda ws: (ws / "afile").write_text("x") and ["mqar", "--out", str(ws / "afile")], {},
     "is a file; give a folder"),
    ("bench-memory", lambda ws: ["bench", "--shapes", "smoke", "--seq", "100000"], {},
     "--seq 100000: one layer's attention scores alone take"),
    ("bench-out", lambda ws: (ws / "afile").write_text("x") and ["bench", "--shapes", "smoke", "--out",
                                                                   str(ws / "afile" / "b")], {}, "cannot write there"),
    ("no-apt-get", lambda ws: ["data", "prepare", "debmix"], {"PATH": "/nonexistent"}, "apt-get is not available"),
    ("runs-dir-under-a-file", lambda ws: (ws / "afile").write_text("x") and ["train", *SMOKE, "--corpus", "pydocs"],
     {"COUPLED_QK_RUNS_DIR": "{ws}/afile/runs"}, "set runs_dir in settings.ini"),
]


def _tree(d: Path) -> dict:
    "Every file (with its bytes) and every folder under `d`: locks and empty folders count."
    return {p.relative_to(d).as_posix(): (p.read_bytes() if p.is_file() else None) for p in sorted(d.rglob("*"))}


def _env(monkeypatch, ws: Path, env: dict):
    for k, v in {"COUPLED_QK_RUNS_DIR": str(ws / "runs"), "COUPLED_QK_FIGURES_DIR": str(ws / "figures"),
                 "COUPLED_QK_DATA_DIR": str(ws / "data"), **env}.items():
        monkeypatch.setenv(k, v.replace("{ws}", str(ws)))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_data_is_one_line_and_leaves_nothing(case, tmp_path, monkeypatch):
    from coupled_qk.cli import main
    name, argv, env, needle = case
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)
    _env(monkeypatch, ws, env)
    argv = argv(ws)
    before = _tree(ws)
    line = one_line_refusal(main, argv)
    assert needle in line, line
    assert _tree(ws) == before, f"a refusal changed the workspace: {sorted(set(_tree(ws)) ^ set(before))}"


def _cli(*args, **env):
    e = dict(os.environ, OMP_NUM_THREADS="1", **env)
    return subprocess.run([BIN, *args], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=600)


def test_state_files_that_cannot_be_read_are_rebuilt(tmp_path, monkeypatch):
    """A truncated manifest, corpus meta.json, token-cache manifest or run result.json: the next command says so in
    one line, rebuilds it and gives the same answer as before."""
    from coupled_qk.cli import main
    _env(monkeypatch, tmp_path, {})
    f = _text(tmp_path)
    out = tmp_path / "runs" / "one"
    argv = ["train", *SMOKE, "--corpus", f"notes={f}", "--tokenizer", "bytes", "--out", str(out)]
    assert main(argv) == 0
    first = json.loads((out / "result.json").read_text())
    data = tmp_path / "data"
    for p in [data / "manifest.json", *(data / "corpora").glob("notes-*/meta.json"), *(data / "tokens").rglob("train.json"),
              out / "result.json"]:
        p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["data", "list"]) == 0
        assert main([*argv, "--resume"]) == 0
    said = err.getvalue()
    assert "manifest.json is not valid JSON" in said and "rebuilt from the prepared corpora" in said, said
    assert "has an unreadable meta.json; rebuilding it" in said, said
    assert "has an unreadable manifest; rebuilding it" in said, said
    assert "result.json is not valid JSON" in said and "finished again from its checkpoint" in said, said
    assert "Traceback" not in said
    again = json.loads((out / "result.json").read_text())
    assert (again["test_ppl"], again["corpus_fingerprint"]) == (first["test_ppl"], first["corpus_fingerprint"])


def test_prepare_with_a_tokenizer_caches_what_train_reads(tmp_path, monkeypatch):
    """`data prepare PATH --tokenizer T` works for a folder of valid/test files and for NAME=PATH, and builds
    exactly the token caches `train --corpus` then reads (train builds none)."""
    from coupled_qk.cli import main
    _env(monkeypatch, tmp_path, {})
    folder = tmp_path / "ptb"
    folder.mkdir()
    for split in ("train", "valid", "test"):
        (folder / f"ptb.{split}.txt").write_text("\n".join(f" {split} sentence {i} of a treebank " for i in range(300)))
    named = f"mine={_text(tmp_path)}"
    for corpus in (str(folder), named):
        assert main(["data", "prepare", corpus, "--tokenizer", "bytes"]) == 0
        caches = {p: p.stat().st_mtime_ns for p in (tmp_path / "data" / "tokens").rglob("*.bin")}
        assert main(["train", *SMOKE, "--corpus", corpus, "--tokenizer", "bytes", "--out",
                     str(tmp_path / "runs" / Path(corpus).name)]) == 0
        assert {p: p.stat().st_mtime_ns for p in (tmp_path / "data" / "tokens").rglob("*.bin")} == caches, corpus
    assert len(list((tmp_path / "data" / "tokens").rglob("*.bin"))) == 6


def test_killed_force_prepare_never_trains_on_a_partial_corpus(tmp_path):
    """`data prepare NAME=PATH --force` killed with SIGKILL while it writes the new build: the old build is still
    whole, `train` trains on all of it under the same run id, and the next prepare removes what the killed one left."""
    env = dict(COUPLED_QK_DATA_DIR=str(tmp_path / "data"), COUPLED_QK_RUNS_DIR=str(tmp_path / "runs"))
    f = _text(tmp_path, n=60_000)                       # ~30 MB of text: its build takes seconds
    spec = f"big={f}"
    assert _cli("data", "prepare", spec, **env).returncode == 0
    corpora = tmp_path / "data" / "corpora"
    (built,) = [p for p in corpora.iterdir() if p.is_dir()]
    meta = json.loads((built / "meta.json").read_text())
    p = subprocess.Popen([BIN, "data", "prepare", spec, "--force"], cwd=ROOT,
                         env=dict(os.environ, **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    while time.time() - t0 < 120:                       # kill it once the new train.jsonl is being written
        part = list(corpora.glob(f".{built.name}.tmp*/train.jsonl"))
        if part and part[0].stat().st_size > 0:
            break
        time.sleep(0.005)
    else:
        p.kill()
        pytest.fail("the forced prepare never started writing its build")
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert list(corpora.glob(f".{built.name}.tmp*")), "the killed build left no temporary (it finished first?)"
    r = _cli("train", *SMOKE, "--corpus", spec, "--tokenizer", "bytes", **env)
    assert r.returncode == 0, r.stderr
    res = json.loads(next((tmp_path / "runs").rglob("result.json")).read_text())
    assert res["corpus_fingerprint"] == meta["fingerprint"]
    assert _cli("data", "prepare", spec, "--force", **env).returncode == 0
    assert not list(corpora.glob(".*.tmp*")), "the next writer did not remove the killed one's temporary"


def test_killed_writers_temporaries_and_a_torn_jobs_file(tmp_path, monkeypatch):
    """A token cache's writer killed mid-write leaves `.train.bin.tmpPID`: the next writer removes it. A torn jobs file
    (the Slurm jobs a `reproduce` follows) is one line naming it and the fix."""
    from coupled_qk.documents import file_sha256
    from coupled_qk.executors import SubmititPool
    from coupled_qk.provenance import StateError
    from coupled_qk.tokens import token_cache
    _env(monkeypatch, tmp_path, {})
    spec = f"notes={_text(tmp_path)}"
    token_cache(spec, "bytes", "train")
    cache = next((tmp_path / "data" / "tokens").rglob("train.bin"))
    (cache.parent / ".train.bin.tmp99999").write_bytes(b"half a cache")
    cache.write_bytes(cache.read_bytes()[:100])          # and the cache itself torn: the next use rewrites it
    file_sha256.cache_clear()
    token_cache(spec, "bytes", "train")
    assert not list(cache.parent.glob(".*.tmp*"))
    pool = SubmititPool("submitit-local", tmp_path / "jobs")
    pool.jobs_file.write_text('{"lm-1": "12')
    with pytest.raises(StateError, match="jobs.json is not valid JSON .*; delete it"):
        pool._jobs()


def test_interrupted_train_says_how_to_resume():
    "After Ctrl-C, `train` names the flag that continues the run (the same command alone is refused)."
    from coupled_qk.cli_options import run_command

    def body(argv):
        raise KeyboardInterrupt
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert run_command("coupled-qk train", body, []) == 130
    assert "the same command with --resume continues" in err.getvalue(), err.getvalue()
