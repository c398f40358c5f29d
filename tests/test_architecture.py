"""The architecture in the tree: the layers are folders, imports run one way (the contract in
``.importlinter``, enforced by ``lint-imports``), no import cycle anywhere in ``es/``, no module
reaches for another's underscore names, and docs/architecture.md names every module."""

import ast
import re
import shutil
import subprocess
import sys

import grimp
import pytest
from conftest import BIN, REPO

PACKAGE = REPO / "es"
#: The package face and what spans the layers; everything else lives in a layer's folder.
TOP_LEVEL = {"__init__.py", "config.py", "functions.py"}


def modules() -> list[str]:
    """Every module of ``es`` by dotted name, packages included."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (import cycles), iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return cycles


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ``es`` it imports, as grimp reads them (function-level imports
    included: they run too)."""
    graph = grimp.build_graph("es")
    return {module: set(graph.find_modules_directly_imported_by(module))
            for module in graph.modules}


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]


def test_no_import_cycle_anywhere_in_es():
    graph = import_graph()
    assert set(modules()) <= set(graph), "grimp missed modules of es"
    assert strongly_connected(graph) == []


def test_the_top_level_holds_the_package_face_and_the_layers():
    files = {path.name for path in PACKAGE.glob("*.py")}
    assert files == TOP_LEVEL and len(files) <= 4
    folders = {path.name for path in PACKAGE.iterdir()
               if path.is_dir() and path.name != "__pycache__"}
    # configs: no code, the shipped configs (a link to the checkout's configs/, for the wheel)
    assert folders == {"core", "strategies", "parallel", "rl", "blackbox", "bench", "cli",
                       "baselines", "launch", "configs"}
    assert not list((PACKAGE / "configs").rglob("*.py"))


def private_imports(source: str, own: str) -> list[str]:
    """``module:line: what`` for every use of another ``es`` module's underscore name in the
    module ``own``: ``from es.x import _name`` or ``es.x._name`` (dunders such as
    ``__version__`` are public)."""
    tree = ast.parse(source, own)
    known = set(modules())
    aliases: dict[str, str] = {}  # a local name bound to an es module
    found = []

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "es":
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if target in known:
                    aliases[alias.asname or alias.name] = target
                if node.module != own and private(alias.name):
                    found.append(f"{own}:{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "es":
                    aliases[alias.asname or "es"] = alias.name if alias.asname else "es"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            dotted, base = [], node.value
            while isinstance(base, ast.Attribute):
                dotted.insert(0, base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                module = ".".join([aliases[base.id], *dotted])
                if module in known and module != own:
                    found.append(f"{own}:{node.lineno}: {module}.{node.attr}")
    return found


def test_the_private_name_check_sees_both_forms():
    source = ("import es.core.noise\nfrom es.rl.runs import _x\nfrom es.bench import report\n"
              "a = es.core.noise._LINE\nb = report._hidden\nc = es.__version__\n"
              "from es.rl.sample import _mine\n")
    assert private_imports(source, "es.rl.sample") == [
        "es.rl.sample:2: from es.rl.runs import _x",
        "es.rl.sample:4: es.core.noise._LINE",
        "es.rl.sample:5: es.bench.report._hidden"]


def test_no_module_uses_another_modules_underscore_names():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        found += private_imports(path.read_text(), ".".join(parts))
    assert found == []


def test_the_architecture_doc_names_every_module():
    """docs/architecture.md's code layout: one row per folder, naming each of its modules."""
    text = (REPO / "docs" / "architecture.md").read_text()
    rows = dict(re.findall(r"^\| `(es/[a-z_/]*)` \| (.*) \|$", text, re.M))
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        folder = f"{path.parent.relative_to(REPO).as_posix()}/"
        if path.name == "__init__.py":
            if folder not in rows:
                missing.append(folder)
        elif path.parent == PACKAGE:
            if f"`{path.name}`" not in rows.get("es/", ""):
                missing.append(f"es/{path.name}")
        elif f"`{path.name}`" not in rows.get(folder, ""):
            missing.append(f"{folder}{path.name}")
    assert missing == [], "add them to docs/architecture.md's code layout"


def lint(tree) -> subprocess.CompletedProcess:
    """``lint-imports`` with the project's contract over the copy of ``es`` in ``tree``."""
    return subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=tree, text=True,
                          capture_output=True, timeout=120,
                          env={"PATH": str(BIN), "PYTHONPATH": str(tree)})


def test_the_contract_holds_for_the_package():
    done = lint(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(("module", "line", "message"), [
    ("strategies/snes.py", "import gymnasium",
     "es.strategies.snes -> gymnasium"),
    ("rl/trainer.py", "import mpi4py",
     "es.rl.trainer -> mpi4py"),
    ("core/noise.py", "from es.rl import policies",
     "es.core.noise -> es.rl.policies"),
    ("parallel/comm.py", "from es.strategies import base",
     "es.parallel.comm -> es.strategies.base"),
])
def test_the_contract_fails_naming_the_import_that_broke_it(tmp_path, module, line, message):
    shutil.copytree(PACKAGE, tmp_path / "es", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path)
    target = tmp_path / "es" / module
    target.write_text(f"{line}\n{target.read_text()}")
    done = lint(tmp_path)
    assert done.returncode == 1, done.stdout
    assert re.search(rf"^-\s+{re.escape(message)} \(l\.1\)$", done.stdout, re.M), done.stdout


def test_the_contract_wants_every_new_folder_placed_in_a_layer(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "es", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path)
    (tmp_path / "es" / "extras").mkdir()
    (tmp_path / "es" / "extras" / "__init__.py").write_text("")
    done = lint(tmp_path)
    assert done.returncode != 0 and "es.extras" in done.stdout + done.stderr


def test_importing_es_loads_neither_numpy_nor_mpi():
    code = ("import sys, es, es.cli.args, es.cli.train; "
            "print(*sorted(m for m in ('numpy', 'mpi4py', 'gymnasium') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert done.returncode == 0 and done.stdout.split() == [], done.stdout + done.stderr
