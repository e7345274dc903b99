"""The LAB_* settings live in engine/base/settings.py: named, defaulted and explained there only.

docs/settings.md is generated from it, and no other module reads a LAB_* variable itself.
"""

from __future__ import annotations

import re

import pytest

from engine.base import settings
from engine.base.paths import REPO_ROOT

DOCS = REPO_ROOT / "docs" / "settings.md"
# Where the lab's code is: the Python modules, and the shell entry point `lab`.
CODE = [
    *sorted((REPO_ROOT / "engine").rglob("*.py")),
    *sorted((REPO_ROOT / "pages").rglob("*.py")),
    REPO_ROOT / "app.py",
    REPO_ROOT / "lab",
]
MENTION = re.compile(r"\bLAB_[A-Z0-9_]+\b")
# Reading a variable by its literal name: os.environ.get("LAB_X"), os.environ["LAB_X"],
# getenv("LAB_X"), or a module constant NAME = "LAB_X" read later.
OWN_READ = re.compile(r"""(environ(\.get)?\s*[(\[]|getenv\(|=\s*)["']LAB_[A-Z0-9_]+["']""")


def test_docs_settings_md_is_generated_from_engine_settings() -> None:
    assert DOCS.read_text() == settings.markdown(), (
        "docs/settings.md is stale: python -m engine.base.settings --markdown > docs/settings.md"
    )


def test_a_changed_meaning_makes_the_docs_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above fails on a settings list that differs from the docs."""
    changed = [*settings.ALL[:-1], settings.Setting("LAB_NEW", "Debugging", "A new knob.")]
    monkeypatch.setattr(settings, "ALL", changed)
    assert DOCS.read_text() != settings.markdown()


def test_every_lab_variable_the_code_names_is_a_setting() -> None:
    unknown = {
        f"{path.relative_to(REPO_ROOT)}: {name}"
        for path in CODE
        for name in MENTION.findall(path.read_text())
        if name not in settings.BY_NAME
    }
    assert not unknown, sorted(unknown)


def test_no_module_but_engine_settings_reads_a_lab_variable_itself() -> None:
    own = [
        f"{path.relative_to(REPO_ROOT)}:{n}: {line.strip()}"
        for path in CODE
        if path.suffix == ".py" and path != REPO_ROOT / "engine" / "base" / "settings.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if OWN_READ.search(line)
    ]
    assert not own, own


def test_the_read_check_sees_a_direct_read() -> None:
    assert OWN_READ.search('dsn = os.environ.get("LAB_DEDUP_DSN")')
    assert OWN_READ.search('KEY_ENV = "LAB_PRESENTER_KEY"')
    assert not OWN_READ.search("dsn = settings.DEDUP_DSN.get()")


def test_a_number_that_is_no_number_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_KEEP_RUNS", "many")
    assert settings.KEEP_RUNS.integer(minimum=1) == 200
    monkeypatch.setenv("LAB_KEEP_RUNS", "0")
    assert settings.KEEP_RUNS.integer(minimum=1) == 1
    monkeypatch.setenv("LAB_KEEP_RUNS", "30")
    assert settings.KEEP_RUNS.integer(minimum=1) == 30


def test_unset_and_empty_mean_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAB_SPARK_DRIVER_MEMORY", raising=False)
    assert settings.SPARK_DRIVER_MEMORY.get() == "2g"
    monkeypatch.setenv("LAB_SPARK_DRIVER_MEMORY", "")
    assert settings.SPARK_DRIVER_MEMORY.get() == "2g"
    monkeypatch.setenv("LAB_SPARK_DRIVER_MEMORY", "4g")
    assert settings.SPARK_DRIVER_MEMORY.get() == "4g"


def test_every_setting_has_a_meaning_and_one_name() -> None:
    assert len(settings.BY_NAME) == len(settings.ALL)
    assert all(s.name.startswith("LAB_") and s.meaning.endswith(".") for s in settings.ALL)
