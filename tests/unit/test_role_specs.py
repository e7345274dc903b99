"""engine.roles.specs: each role's spec is a model, the same one its code reads, and Java
checks it against the schema written from that model (java/src/test: SpecTest shows Java
refusing a spec that breaks it)."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from engine.base import paths
from engine.base.errors import LabError
from engine.roles import schemas, specs
from engine.roles.registry import roles
from engine.roles.schemas import schema_models, stale_schemas
from engine.roles.specs import ShareWorkerSpec, SinkSpec

JAVA_SOURCES = paths.REPO_ROOT / "java" / "src" / "main" / "java"
WORKER = {
    "bootstrap": "127.0.0.1:9092",
    "name": "worker-a",
    "history": "/tmp/worker-a.jsonl",
    "group": "workers",
    "input": "queue",
    "output": "queue-out",
}


def test_the_java_schemas_are_written_from_the_models_as_they_are_now():
    assert stale_schemas() == [], "run `python -m engine.roles.schemas` and commit the schemas"


def test_a_changed_model_makes_its_schema_stale(monkeypatch):
    class ShareWorkerSpec(specs.ShareWorkerSpec):  # the same name, one more field
        lease_ms: int = 0

    monkeypatch.setattr(schemas, "schema_models", lambda: {"ShareWorkerSpec": ShareWorkerSpec})
    assert "ShareWorkerSpec" in stale_schemas()


@pytest.mark.parametrize("name", sorted(n for n, r in roles().items() if r.java))
def test_a_java_role_checks_its_spec_against_its_declared_models_schema(name):
    role = roles()[name]
    source = JAVA_SOURCES.joinpath(*role.entry.split(".")).with_suffix(".java").read_text()
    assert re.findall(r'Spec\.load\(args, "(\w+)"\)', source) == [role.spec_model.__name__]
    assert role.spec_model.__name__ in schema_models()


@pytest.mark.parametrize("name", sorted(n for n, r in roles().items() if not r.java))
def test_a_python_role_reads_its_spec_into_its_declared_model(name):
    role = roles()[name]
    source = (paths.REPO_ROOT / "engine" / "roles" / f"{role.entry}.py").read_text()
    assert re.findall(r"load_spec\((\w+)\)", source) == [role.spec_model.__name__]


def test_a_wrong_spec_is_refused_before_a_process_starts_naming_each_field():
    worker = roles()["share-worker"]
    assert worker.checked_spec(WORKER)["ack"] == "after-output"  # defaults filled in
    wrong = {**WORKER, "poison_id": [5], "work_ms": "slow"}
    del wrong["group"]
    with pytest.raises(LabError) as refused:
        worker.checked_spec(wrong)
    said = str(refused.value)
    assert "share-worker" in said
    for field in ("group", "poison_id", "work_ms"):
        assert field in said, said


def test_the_models_refuse_what_the_roles_cannot_use():
    with pytest.raises(ValidationError):
        ShareWorkerSpec.model_validate({**WORKER, "ack": "whenever"})
    with pytest.raises(ValidationError):
        SinkSpec.model_validate({**WORKER, "topic": "t", "partitions": 0, "client_id": "c"})
