"""The house's shape: no file over 900 lines in engine/ or pages/, and no import circle.

An import circle (a imports b, b imports a, even inside a function) means two modules are
one; a helper both need goes into a lower module of its own (docs/architecture.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

from engine.base.paths import REPO_ROOT

MAX_LINES = 900
ROOTS = ("engine", "pages")


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every Python file under engine/ and pages/."""
    found = {}
    for root in ROOTS:
        for path in sorted((REPO_ROOT / root).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The lab modules a file imports anywhere in it (a function's own imports too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # a relative import
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in out if m in known and m != name}


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(path, name, set(found)) for name, path in found.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_file_in_engine_or_pages_is_over_900_lines() -> None:
    long = {
        str(path.relative_to(REPO_ROOT)): n
        for path in modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def test_no_import_circle_in_engine_or_pages() -> None:
    assert circles(import_graph()) == []


def test_the_circle_check_finds_a_circle_even_through_a_function_import(tmp_path) -> None:
    """What engine/metrics/session.py and spark_job.py were: a lazy import back."""
    (tmp_path / "a.py").write_text("from engine import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from engine.a import g\n")
    known = {"engine.a", "engine.b"}
    graph = {
        "engine.a": imports_of(tmp_path / "a.py", "engine.a", known),
        "engine.b": imports_of(tmp_path / "b.py", "engine.b", known),
    }
    assert circles(graph) == [["engine.a", "engine.b"]]
    graph["engine.b"] = set()
    assert circles(graph) == []


def outward_imports(path: Path) -> set[str]:
    """What a file imports from the dashboard's pages or from benchmarks/ (anywhere in it)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        found.update(n for n in names if n.split(".")[0] in ("pages", "benchmarks", "app"))
    return found


def test_the_engine_imports_no_page_and_no_benchmark() -> None:
    """Imports point down: pages and benchmarks use the engine, never the other way."""
    upward = {
        str(path.relative_to(REPO_ROOT)): sorted(names)
        for path in sorted((REPO_ROOT / "engine").rglob("*.py"))
        if (names := outward_imports(path))
    }
    assert not upward, upward


def test_the_upward_check_sees_a_function_import(tmp_path) -> None:
    """What engine/cost/startup.py did: a benchmark imported inside a function."""
    (tmp_path / "startup.py").write_text("def f():\n    from benchmarks.cluster_start import x\n")
    assert outward_imports(tmp_path / "startup.py") == {"benchmarks.cluster_start"}


RUN_FOLDER_FILES = {
    "run.json",
    "scenario.yaml",
    "config.json",
    "result.json",
    "metrics.json",
    "history.jsonl",
    "verdicts.json",
    "stored.json",
    "settings.json",
    "nemesis.jsonl",
    "outbox.jsonl",
}


def file_names_in_code(path: Path) -> set[str]:
    """The run folder's file names a module spells out as strings (docstrings aside)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and id(node) not in docstrings
        and node.value in RUN_FOLDER_FILES
    }


def test_the_run_folder_layout_is_known_in_engine_record_only() -> None:
    elsewhere = {
        str(path.relative_to(REPO_ROOT)): sorted(names)
        for path in modules().values()
        if path != REPO_ROOT / "engine" / "run" / "record.py"
        and (names := file_names_in_code(path))
    }
    assert not elsewhere, elsewhere


def test_the_layout_check_sees_a_file_name_spelled_out(tmp_path) -> None:
    """What engine/run/runner.py did: `folder / "verdicts.json"`."""
    (tmp_path / "m.py").write_text('"""Writes verdicts.json."""\np = folder / "verdicts.json"\n')
    assert file_names_in_code(tmp_path / "m.py") == {"verdicts.json"}


def silent_packages(engine: Path) -> list[str]:
    """The packages under `engine` whose __init__.py says less than a sentence."""
    silent = []
    for init in sorted(engine.glob("*/__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        if len(docstring.split()) < 8 or "." not in docstring:
            silent.append(init.parent.name)
    return silent


def test_every_engine_package_says_what_it_holds(tmp_path) -> None:
    """engine/ is grouped by concern (docs/architecture.md, "The packages"): each package's
    __init__.py opens with a docstring of at least one sentence saying what it holds."""
    assert silent_packages(REPO_ROOT / "engine") == [], "say in a paragraph what it holds"
    for name, text in (("quiet", ""), ("terse", '"""Stuff."""\n'), ("told", DOC)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(text)
    assert silent_packages(tmp_path) == ["quiet", "terse"]


DOC = '"""The judge: from a level\'s history and what was read back, a verdict per message."""\n'
