"""The engine's layers (pyproject.toml's [tool.importlinter], docs/architecture.md "Layers").

import-linter checks the contracts on the tree as it is, and each contract is shown failing
on a copy of the engine with one violating import added: a contract that cannot fail
checks nothing. A last test imports the judge's side in a fresh interpreter, because the
fault registry loads its kinds by name (importlib), which a static graph does not see.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the `engine` package under `tree`, with the project's contracts."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_tree_keeps_every_layer_contract() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


# (the module that gets the import, the line added, the contract it breaks)
VIOLATIONS = [
    ("engine/judging/judge.py", "from engine.kafka import admin", "judge-knows-no-kafka"),
    ("engine/model/words.py", "import confluent_kafka", "judge-knows-no-kafka"),
    # Indirect: the judge reads explain, which reads the fault kinds.
    (
        "engine/faults/nodes.py",
        "from engine.proc.processes import RoleProcess",
        "judge-knows-no-kafka",
    ),
    ("engine/kafka/admin.py", "from engine.cluster import base", "kafka-is-the-floor"),
    ("engine/run/level_run.py", "import streamlit", "engine-does-not-draw"),
    ("engine/proxy/rules.py", "from engine.cluster import base", "no-folder-loops"),
    # A lower package reaching up: the guarantee levels reading the run record.
    ("engine/model/levels.py", "from engine.run import record", "packages-in-layers"),
]


@pytest.mark.parametrize(("module", "line", "contract"), VIOLATIONS)
def test_each_contract_fails_on_a_violating_import(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    shutil.copytree(ROOT / "engine", tmp_path / "engine", ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(f"{line}  # noqa\n" + target.read_text())

    done = lint_imports(tmp_path)

    assert done.returncode != 0, done.stdout
    names = {
        "judge-knows-no-kafka": "The judge and what it reads know no Kafka",
        "kafka-is-the-floor": "engine.kafka (the lab's thin wrappers over Kafka)",
        "engine-does-not-draw": "The engine draws nothing",
        "no-folder-loops": "No two of the engine's folders import each other",
        "packages-in-layers": "The engine's packages stand in layers",
    }
    broken = [ln for ln in done.stdout.splitlines() if ln.endswith("BROKEN")]
    assert [ln for ln in broken if ln.startswith(names[contract])], done.stdout


def test_the_judge_side_loads_no_client_at_run_time() -> None:
    """Importing the judge, the explanations and the fault registry (every kind, loaded by
    name) pulls in no Kafka client, cluster, process, proxy, Spark or Streamlit module."""
    forbidden = (
        "engine.cluster", "engine.kafka", "engine.proxy", "engine.proc.processes", "engine.roles",
        "engine.run.nemesis", "engine.run.level_run", "engine.run.runner", "engine.metrics",
        "confluent_kafka", "pyspark", "docker", "streamlit",
    )  # fmt: skip
    code = (
        "import sys, engine.judging.judge, engine.judging.explain, engine.model.words\n"
        "import engine.faults\n"
        "assert engine.faults.KINDS, 'no fault kind loaded'\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {{'engine', 'confluent_kafka',"
        f" 'pyspark', 'docker', 'streamlit'}} and m.startswith({forbidden!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


# ---- the pages' side: they import the engine's face only ----------------------------------
# Not an import-linter contract: pages/ is Streamlit's folder of scripts, not a package of
# the engine's, and a "forbidden" contract would have to list every engine module but one
# (a module added later would slip through). The rule is one line of AST instead.


def engine_imports_beside_the_face(source: str) -> list[str]:
    """Every engine module a page's source imports, other than engine.face."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [
            m for m in modules if (m == "engine" or m.startswith("engine.")) and m != "engine.face"
        ]
    return found


def page_sources() -> list[Path]:
    return [*sorted((ROOT / "pages").glob("*.py")), ROOT / "app.py"]


def test_the_pages_import_only_the_engine_face() -> None:
    beside = {
        str(path.relative_to(ROOT)): found
        for path in page_sources()
        if (found := engine_imports_beside_the_face(path.read_text()))
    }
    assert beside == {}, f"import these through engine/face.py instead: {beside}"


@pytest.mark.parametrize(
    "line",
    [
        "from engine.run.record import load_run",
        "from engine import record",
        "import engine.run.level_run",
        "    from engine.metrics.compute import compute_and_save",  # inside a function
    ],
)
def test_the_face_rule_fails_on_a_page_importing_an_engine_module(line: str) -> None:
    page = (ROOT / "pages" / "replay.py").read_text()
    body = f"def late():\n{line}\n" if line.startswith(" ") else f"{line}\n"
    assert engine_imports_beside_the_face(body + page)
    assert not engine_imports_beside_the_face(page)


def test_the_face_exports_what_it_names() -> None:
    """Every name in engine.face.__all__ is there, and every name a page takes from the face
    is in __all__ (a page cannot lean on something the face imports by accident)."""
    import engine.face as face

    missing = [name for name in face.__all__ if not hasattr(face, name)]
    assert missing == []
    taken = {
        alias.name
        for path in page_sources()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "engine.face"
        for alias in node.names
    }
    assert taken - set(face.__all__) == set()
