"""Fetching Debian packages as a new machine meets it, against a real apt and a `file://` archive built here: a tiny
package at two versions (dpkg-deb, indexed by apt-ftparchive or dpkg-scanpackages), `APT_CONFIG` pointing at a private
apt state, and a stand-in for Debian's snapshot archive on localhost. Nothing depends on what Debian's archive serves
today: a cached .deb, a refresh on stale lists and on empty ones, the project's own copy of the lists (no root), a
version gone (one line, nothing left behind), the snapshot archive unreachable, and serving the version."""
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from coupled_qk import debian
from coupled_qk.debian import VersionGone, deb_version, fetch_deb

INDEXER = shutil.which("apt-ftparchive") or shutil.which("dpkg-scanpackages")
pytestmark = pytest.mark.skipif(
    not (shutil.which("apt-get") and shutil.which("dpkg-deb") and INDEXER),
    reason="needs apt-get, dpkg-deb and an archive indexer: apt-ftparchive (apt-utils) or dpkg-scanpackages (dpkg-dev); "
           "`make test` installs apt-utils where it runs as root on Debian")
PKG = "cqk-tiny"


def _build_deb(root: Path, version: str) -> Path:
    d = root / f"build-{version}"
    (d / "DEBIAN").mkdir(parents=True)
    (d / "DEBIAN" / "control").write_text(f"Package: {PKG}\nVersion: {version}\nArchitecture: all\n"
                                          "Maintainer: t <t@example.org>\nDescription: a tiny test package\n")
    (d / "usr/share/doc" / PKG).mkdir(parents=True)
    (d / "usr/share/doc" / PKG / "text").write_text(f"the text of {version}\n")
    out = root / f"{PKG}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(d), str(out)], check=True,
                   capture_output=True)
    return out


class Archive:
    "A flat `file://` apt archive that serves the versions given to `serve`, and an apt state of its own."
    def __init__(self, root: Path):
        self.root, self.repo = root, root / "repo"
        self.debs = {v: _build_deb(root, v) for v in ("1.0-1", "1.0-2")}
        self.repo.mkdir()
        (root / "sources.list.d").mkdir()
        (root / "sources.list").write_text(f"deb [trusted=yes] file://{self.repo} ./\n")
        for d in ("state/lists/partial", "cache/archives/partial"):
            (root / d).mkdir(parents=True)
        self.config = root / "apt.conf"
        self.config.write_text("\n".join([
            f'Dir::Etc::sourcelist "{root}/sources.list";', f'Dir::Etc::sourceparts "{root}/sources.list.d";',
            f'Dir::State "{root}/state";', f'Dir::Cache "{root}/cache";',
            'APT::Sandbox::User "root";' if os.geteuid() == 0 else "", ""]))

    def serve(self, *versions: str) -> None:
        for f in self.repo.glob("*.deb"):
            f.unlink()
        for v in versions:
            shutil.copy(self.debs[v], self.repo)
        cmd = [INDEXER, "packages", "."] if INDEXER.endswith("apt-ftparchive") else [INDEXER, "-m", ".", "/dev/null"]
        index = subprocess.run(cmd, cwd=self.repo, check=True, capture_output=True, text=True).stdout
        (self.repo / "Packages").write_text(index)

    def apt(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(["apt-get", *args], cwd=cwd or self.root, capture_output=True, text=True,
                              env={**os.environ, "APT_CONFIG": str(self.config)})

    def lists(self) -> list[str]:
        return sorted(p.name for p in (self.root / "state/lists").glob("*Packages*"))


@pytest.fixture
def archive(tmp_path, monkeypatch):
    a = Archive(tmp_path / "archive")
    monkeypatch.setenv("APT_CONFIG", str(a.config))
    monkeypatch.setenv("COUPLED_QK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(debian, "SNAPSHOT_URL", "http://127.0.0.1:9")      # nothing listens: unreachable at once
    monkeypatch.setattr(debian, "_REFRESHED", set())
    return a


def _fetch(*args, **kw):
    lines = []
    return fetch_deb(PKG, *args, **kw, log=lines.append), lines


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_a_deb_in_data_debs_is_used_without_apt(archive, tmp_path, monkeypatch):
    debs = tmp_path / "data" / "debs"
    debs.mkdir(parents=True)
    shutil.copy(archive.debs["1.0-1"], debs)
    run = debian._run
    def no_apt(cmd, **kw):
        assert not cmd[0].startswith("apt"), cmd
        return run(cmd, **kw)
    monkeypatch.setattr(debian, "_run", no_apt)
    deb, said = _fetch("1.0-1", exact=True)
    assert deb.parent == debs and deb_version(deb) == "1.0-1" and said == []


def test_stale_lists_are_refreshed_once(archive):
    archive.serve("1.0-1")
    assert archive.apt("update", "-qq").returncode == 0 and archive.lists()     # lists as a machine ships them
    archive.serve("1.0-2")                                                      # then the archive moved on
    r = archive.apt("download", f"{PKG}=1.0-2")
    assert r.returncode and "was not found" in r.stderr, r.stderr               # apt's words for stale lists
    deb, said = _fetch("1.0-2", exact=True)
    assert deb_version(deb) == "1.0-2"
    assert len(said) == 1 and "refreshed" in said[0] and f"{PKG}=1.0-2" in said[0], said
    _, again = _fetch("1.0-2", exact=True)
    assert again == []                                                          # the .deb is reused: no apt at all


def test_empty_lists_are_refreshed_and_a_gone_pin_takes_the_candidate(archive):
    archive.serve("1.0-2")
    assert archive.lists() == []
    deb, said = _fetch("1.0-1")                 # a default corpus's pin that left the archive: the candidate
    assert deb_version(deb) == "1.0-2"
    assert len(said) == 1 and "refreshed" in said[0], said                     # once, though apt was asked twice
    assert archive.lists()


def test_without_root_the_lists_are_a_copy_of_the_projects_own(archive, tmp_path, monkeypatch):
    monkeypatch.setattr(debian, "_may_refresh_machine_lists", lambda: False)
    archive.serve("1.0-2")
    deb, said = _fetch("1.0-2", exact=True)
    own = tmp_path / "data" / "apt"
    assert deb_version(deb) == "1.0-2" and archive.lists() == []               # the machine's lists untouched
    assert any((own / "state" / "lists").glob("*Packages*"))
    assert len(said) == 1 and str(own) in said[0], said


def test_a_version_gone_is_one_line_and_leaves_nothing(archive, tmp_path):
    archive.serve("1.0-2")
    t = time.time()
    with pytest.raises(VersionGone) as e:
        fetch_deb(PKG, "1.0-1", exact=True, snapshot="debian/20261201T000000Z bookworm main", log=lambda line: None)
    assert time.time() - t < 20                  # the snapshot archive unreachable: a quick failure
    msg = str(e.value)
    assert "\n" not in msg
    for part in (f"{PKG}_1.0-1_all.deb", str(tmp_path / "data" / "debs"), "127.0.0.1:9",
                 "`deb [check-valid-until=no] http://127.0.0.1:9/archive/debian/20261201T000000Z bookworm main`"):
        assert part in msg, (part, msg)
    assert _tree(tmp_path / "data") == []


def test_data_prepare_of_a_gone_release_is_exit_2_and_leaves_nothing(archive, tmp_path):
    import contextlib
    import io
    from coupled_qk.cli import main
    archive.serve("1.0-2")                      # an archive without python3.11-doc at all
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["data", "prepare", "pydocs@3.11.2-6+deb11u1"])
    *progress, line = err.getvalue().strip().splitlines()
    assert rc == 2 and "Traceback" not in err.getvalue() and all("refreshed" in x for x in progress), err.getvalue()
    assert line.startswith("coupled-qk data: error: python3.11-doc 3.11.2-6+deb11u1 is not served here"), line
    assert "python3.11-doc_3.11.2-6+deb11u1_" in line
    assert _tree(tmp_path / "data") == []


class _Snapshot(http.server.BaseHTTPRequestHandler):
    "Debian's snapshot archive in miniature: its machine-readable API and its files by sha1."
    files: dict = {}
    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if parts[:2] == ["mr", "binary"] and len(parts) == 5:
            hashes = [h for h, (p, v, _) in self.files.items() if (p, v) == (parts[2], parts[3])]
            body = json.dumps({"result": [{"architecture": "all", "hash": h} for h in hashes]}).encode()
        elif parts[0] == "file" and parts[1] in self.files:
            body = self.files[parts[1]][2]
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass


@pytest.fixture
def snapshot(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Snapshot)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(debian, "SNAPSHOT_URL", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setattr(_Snapshot, "files", {})
    yield _Snapshot.files
    server.shutdown()


def test_the_snapshot_archive_serves_an_exact_version(archive, snapshot, tmp_path):
    archive.serve("1.0-2")
    data = archive.debs["1.0-1"].read_bytes()
    snapshot[hashlib.sha1(data).hexdigest()] = (PKG, "1.0-1", data)
    deb, _ = _fetch("1.0-1", exact=True)
    assert deb.name == f"{PKG}_1.0-1_all.deb" and deb_version(deb) == "1.0-1"
    # a file that is not the one the archive names is refused, and nothing of it stays
    (tmp_path / "data").rename(tmp_path / "first")
    snapshot.clear()
    snapshot[hashlib.sha1(data).hexdigest()] = (PKG, "1.0-1", data[:-10])
    with pytest.raises(VersionGone, match="sha1"):
        fetch_deb(PKG, "1.0-1", exact=True, log=lambda line: None)
    assert _tree(tmp_path / "data") == []


def test_reproduce_skips_an_artifact_whose_version_is_gone(tmp_path, monkeypatch):
    from coupled_qk import corpora
    from coupled_qk.runner import reproduce

    def prepare(name, log=None, force=False):
        if "@" in name:
            raise VersionGone(f"python3.11-doc {name.partition('@')[2]} is not served here (…); to get it, …")
        return {}
    monkeypatch.setattr(corpora, "prepare", prepare)
    said = []
    rep = reproduce(["drift"], "cpu", runs_dir=tmp_path / "runs", figures_dir=tmp_path / "figures", log=said.append)
    assert list(rep.skipped) == ["drift"] and rep.skipped["drift"].startswith("skipped drift: python3.11-doc 3.11.2-6+deb12u9")
    assert rep.skipped["drift"] in said and rep.executed == [] and rep.artifact_dirs == []


def test_a_dry_run_needs_no_apt(tmp_path, monkeypatch, capsys):
    "The drift artifact's dry run, its point release not prepared (every artifact is listed so in the registry chapter)."
    from coupled_qk.cli import main
    monkeypatch.setenv("PATH", str(tmp_path))                               # no apt-get, no dpkg-deb
    monkeypatch.setenv("COUPLED_QK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COUPLED_QK_RUNS_DIR", str(tmp_path / "runs"))
    assert main(["reproduce", "drift", "--scale", "cpu", "--dry-run", "--list"]) == 0
    out = capsys.readouterr().out
    assert "pydocs@3.11.2-6+deb12u9" in out and not (tmp_path / "data").exists(), out
