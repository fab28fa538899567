"""The package's layers point down: the CLI on top, then the pipeline, the trainers, data and models, the maths,
and settings/provenance at the bottom. Every import counts, lazy ones inside functions too, since they run."""
import ast
from pathlib import Path

from conftest import ROOT

PKG = ROOT / "coupled_qk"
# rank of each module: a module may import only modules of a lower or equal rank (equal: no cycle, checked below)
LAYERS = {
    "cli": 6, "cli_options": 6, "cli_train": 6, "cli_reproduce": 6,
    "runner": 5, "rehearsal": 5, "results": 5, "registry": 5, "executors": 5, "bench": 5, "counters": 5, "bench_report": 5,
    "hf": 5, "export": 5, "adapt": 5, "adapters": 5, "scales": 5, "calls": 5, "costs": 5,
    "train": 4, "mqar_train": 4, "glue": 4, "runs": 4, "distributed": 4, "optim": 4, "evaluation": 4,
    "corpora": 3, "tokens": 3, "documents": 3, "embedded": 3, "debian": 3, "mqar": 3, "model": 3, "attention": 3,
    "invertible": 3, "integrators": 3, "plots": 3, "pretrained": 3,
    "comparisons": 1, "power": 1, "decisions": 1, "curves": 1, "hierarchy": 1, "settings": 0, "provenance": 1,
}


def imports(path: Path) -> set[str]:
    "The package modules that `path` imports, anywhere in it (`from . import x`, `from coupled_qk.x import`, ...)."
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1:
                out |= {mod.split(".")[0]} if mod else {a.name for a in node.names}
            elif mod.startswith("coupled_qk."):
                out.add(mod.split(".")[1])
            elif mod == "coupled_qk":
                out |= {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("coupled_qk.")}
    return {m for m in out if (PKG / f"{m}.py").is_file()} - {path.stem}


def graph() -> dict[str, set[str]]:
    return {p.stem: imports(p) for p in sorted(PKG.glob("*.py")) if not p.stem.startswith("_")}


def test_every_module_has_a_layer():
    assert set(graph()) <= set(LAYERS), f"modules without a layer: {sorted(set(graph()) - set(LAYERS))}"


def test_nothing_imports_the_cli():
    users = sorted(m for m, deps in graph().items() if "cli" in deps)
    assert not users, f"these modules import the CLI, which sits on top: {users}"


def test_imports_point_down():
    up = sorted(f"{m} -> {d}" for m, deps in graph().items() for d in deps if LAYERS[d] > LAYERS[m])
    assert not up, f"imports that point up a layer: {up}"


def cycles(g: dict[str, set[str]]) -> list[str]:
    "Every import cycle a depth-first walk of `g` meets, as 'a -> b -> a'."
    state, found = {}, []

    def visit(m, path):
        state[m] = "open"
        for d in sorted(g.get(m, ())):
            if state.get(d) == "open":
                found.append(" -> ".join(path[path.index(d):] + [d]))
            elif d not in state:
                visit(d, path + [d])
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    return found


def test_no_import_cycles():
    assert not cycles(graph()), f"import cycles: {cycles(graph())}"


def test_the_checks_can_fail(tmp_path):
    "The parser sees relative, absolute and lazy imports, and the walk finds a cycle (a test that cannot fail proves nothing)."
    f = tmp_path / "train.py"
    f.write_text("from .runs import x\nimport coupled_qk.model\ndef f():\n    from coupled_qk.cli import main\n")
    assert imports(f) == {"runs", "model", "cli"}
    assert cycles({"train": {"cli"}, "cli": {"runner"}, "runner": {"train"}}) == ["cli -> runner -> train -> cli"]
    assert cycles({"cli": {"train"}, "train": {"model"}}) == []
