"""The project's import rules, read from the source with ``ast`` (imports inside functions count too):

1. No import circle among the project's modules (servicekit, client, the services, the clients,
   bench, tools): module A imports B when it says ``import B``, ``from B import x`` (B.x when that
   is a module), or a relative form of either. A package's ``__init__`` is the package's module.
2. Services are store_service, embed_service, rank_service and gateway. A service imports only its
   own package and what is shared: servicekit, client and the generated ``recallatron.*`` messages.
   It never imports another service, a client program, bench or tools.
3. Client programs are cli, web and mcp_server. They import no service package: they reach the
   system through ``client`` (the gateway's stubs) and take shared limits and rules from servicekit.
   The one exception is the launcher ``cli.serve`` (``recallatron serve NAME``), whose job is to run a
   service in its own process, so it imports that service's server. Nor do web and mcp_server import
   another client program: cli launches them (``recallatron web``, ``recallatron mcp``), not the reverse.
4. servicekit and client import neither a service nor a client program (they are what both share).

bench and tools may import anything (they measure and exercise the internals); only rule 1 applies
to them.
"""

import ast
from pathlib import Path

from test_cli_imports import find_cycle

ROOT = Path(__file__).resolve().parent.parent
SERVICES = ("store_service", "embed_service", "rank_service", "gateway")
CLIENTS = ("cli", "web", "mcp_server")
SHARED = ("servicekit", "client")
PACKAGES = (*SHARED, *SERVICES, *CLIENTS, "bench", "tools")
LAUNCHER = "cli.serve"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of PACKAGES under ``root``: dotted name -> file."""
    return {module_name(p, root): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))}


def _literal(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _dynamic_import(node: ast.AST) -> ast.expr | None:
    """The name argument of an ``importlib.import_module(...)`` or ``__import__(...)`` call."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if called in ("import_module", "__import__"):
            return node.args[0]
    return None


def computed_imports(path: Path) -> list[int]:
    """Lines of ``path`` importing a module by a computed name (not a string literal): no rule could
    see where they lead."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if (arg := _dynamic_import(node)) is not None and not _literal(arg)
    ]


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` (at ``path``) imports, anywhere in the file, by import statements
    and by ``importlib.import_module`` / ``__import__`` of a literal name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if _literal(arg := _dynamic_import(node)):
            targets = [arg.value]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a non-module name: its module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = project_modules(root)
    return {name: imports_of(name, path, modules.keys()) for name, path in modules.items()}


def top(module: str) -> str:
    return module.split(".")[0]


def broken_rules(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(importer, imported) pairs that break rules 2 to 4."""
    broken = set()
    for importer, targets in graph.items():
        for target in targets:
            mine, theirs = top(importer), top(target)
            if mine == theirs or theirs in SHARED:
                continue
            if mine in SERVICES or mine in SHARED:
                broken.add((importer, target))
            elif mine in CLIENTS and theirs in SERVICES and importer != LAUNCHER:
                broken.add((importer, target))
            elif mine in CLIENTS and theirs in CLIENTS and mine != "cli":
                broken.add((importer, target))
    return broken


def test_no_import_circle():
    graph = import_graph()
    assert find_cycle(graph) is None, find_cycle(graph)
    assert {"client", "client.system", "embed_service.models", "store_service.server", "cli.main"} <= graph.keys()


def test_services_and_clients_keep_to_their_own():
    assert broken_rules(import_graph()) == set()


def test_no_module_imports_by_a_computed_name():
    found = {name: lines for name, path in project_modules().items() if (lines := computed_imports(path))}
    assert found == {}


def test_the_rules_see_what_they_forbid(tmp_path):
    """Each rule fails on a tree that breaks it: a circle through a function-level and a relative
    import, a service importing another's internals, a client importing a service (the launcher
    excepted), web importing cli (not the reverse), and the shared package importing a client program."""
    files = {
        "embed_service/__init__.py": "",
        "embed_service/models.py": "def f():\n    from embed_service import export_onnx\n",
        "embed_service/export_onnx.py": "from .models import f\n",
        "store_service/__init__.py": "",
        "store_service/job.py": "from embed_service.models import f\nimport servicekit.limits\n",
        "servicekit/__init__.py": "",
        "servicekit/limits.py": "",
        "client/__init__.py": "from cli import command\n",
        "cli/__init__.py": "",
        "cli/command.py": "import client\n",
        "cli/serve.py": "def start():\n    from store_service import job\n",
        "web/__init__.py": "",
        "web/calls.py": "import store_service.job\nfrom client import bearer\nfrom cli.command import fail\n",
        "cli/web_command.py": "def run():\n    from web import calls\n",
        "rank_service/__init__.py": "",
        "rank_service/late.py": "import importlib\n\ndef f(n):\n    importlib.import_module('store_service.job')\n"
        "    return __import__(n)\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = import_graph(tmp_path)
    assert graph["embed_service.export_onnx"] == {"embed_service.models"}
    cycle = find_cycle({k: v for k, v in graph.items() if k.startswith("embed_service")})
    assert cycle == ["embed_service.export_onnx", "embed_service.models", "embed_service.export_onnx"]
    assert find_cycle({"client": graph["client"], "cli.command": graph["cli.command"]}) is not None
    assert computed_imports(tmp_path / "rank_service/late.py") == [5]
    assert broken_rules(graph) == {
        ("rank_service.late", "store_service.job"),
        ("store_service.job", "embed_service.models"),
        ("web.calls", "store_service.job"),
        ("web.calls", "cli.command"),
        ("client", "cli.command"),
    }
