"""The command line's module graph: no import cycle among cli modules, and nothing imports cli.main
(it is only run, as ``python -m cli.main`` or the ``recallatron`` script), so that no module depends
on the whole command line. The one exception is the tests' runner of the command line in-process,
tests/cli_runner.py, which calls main as the script does."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {".venv", ".tools", "gen", "third_party", ".git"}
# The one module that may import cli.main: it runs the command line in the tests' process.
RUNNER = "tests/cli_runner.py"


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (``from cli import x`` counts as cli.x)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def python_files() -> list[Path]:
    return [p for p in sorted(ROOT.rglob("*.py")) if not SKIP.intersection(p.relative_to(ROOT).parts)]


def cli_graph() -> dict[str, set[str]]:
    modules = {f"cli.{p.stem}": p for p in (ROOT / "cli").glob("*.py") if p.stem != "__init__"}
    return {name: imported_modules(path) & modules.keys() for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first repeated at the end), or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node], _ = "open", stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node], _ = "done", stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_among_cli_modules():
    graph = cli_graph()
    assert {"cli.main", "cli.dataset", "cli.evaluate", "cli.calibrate", "cli.command"} <= graph.keys()
    assert find_cycle(graph) is None, find_cycle(graph)


def test_nothing_but_the_runner_imports_cli_main():
    importers = [str(p.relative_to(ROOT)) for p in python_files() if "cli.main" in imported_modules(p)]
    assert importers == [RUNNER]


def test_the_cycle_finder_finds_cycles():
    """The check above could not fail if the finder were blind: it must see the old circle and a self-import."""
    old = {
        "cli.main": {"cli.evaluate", "cli.calibrate"},
        "cli.evaluate": {"cli.main"},
        "cli.calibrate": {"cli.evaluate"},
    }
    assert find_cycle(old) == ["cli.calibrate", "cli.evaluate", "cli.main", "cli.calibrate"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_imports_inside_functions_are_seen(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from cli.main import build_parser\n    import cli.evaluate\nfrom cli import client\n")
    assert {"cli.main", "cli.evaluate", "cli.client"} <= imported_modules(src)
