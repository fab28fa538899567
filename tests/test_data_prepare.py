"""The data command as a user meets it: one line on stderr and exit status 2 for a data problem, never a
traceback, and a fast failure for a hub corpus without a network (HF_HUB_OFFLINE or no route to the hub)."""
import os
import subprocess
import sys
import time

from conftest import ROOT

CALL = "import sys; from coupled_qk.cli import main; sys.exit(main(['data', *sys.argv[1:]]))"


def _data(*args, **env):
    return subprocess.run([sys.executable, "-c", CALL, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_unknown_corpus_is_one_line():
    r = _data("prepare", "no-such-corpus")
    assert r.returncode == 2, r
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "valid: pydocs, pystdlib, debmix, wikitext103, pubmed, openwebtext" in r.stderr


def test_missing_local_path_names_the_setting(tmp_path):
    r = _data("prepare", "openwebtext", COUPLED_QK_LOCAL_OPENWEBTEXT=str(tmp_path / "missing"),
              COUPLED_QK_DATA_DIR=str(tmp_path / "data"))
    assert r.returncode == 2 and "COUPLED_QK_LOCAL_OPENWEBTEXT" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_hub_offline_fails_fast(tmp_path):
    t = time.time()
    r = _data("prepare", "wikitext103", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", COUPLED_QK_LOCAL_WIKITEXT103="",
              COUPLED_QK_DATA_DIR=str(tmp_path / "data"))
    assert time.time() - t < 30
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "set local_wikitext103 in settings.ini or COUPLED_QK_LOCAL_WIKITEXT103" in r.stderr
    assert "pydocs|pystdlib|debmix" in r.stderr
