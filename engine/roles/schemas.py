"""The JSON Schemas the Java roles check their specs against, written from the models
(engine/roles/specs.py and any a role declares in its own module): `python -m
engine.roles.schemas` after a model changed; tests/unit/test_role_specs.py fails while a
schema differs from its model."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from engine.base import paths
from engine.roles.registry import roles
from engine.roles.specs import RoleSpec

SCHEMA_DIR = paths.REPO_ROOT / "java" / "src" / "main" / "resources" / "lab" / "specs"


def schema_models() -> dict[str, type[RoleSpec]]:
    """Every registered role's spec model, by the name a Java role asks for
    (`Spec.load(args, "SinkSpec")`)."""
    return {role.spec_model.__name__: role.spec_model for role in roles().values()}


def schema_text(model: type[BaseModel]) -> str:
    """The model's JSON Schema (draft 2020-12, as pydantic writes it), as the file holds it."""
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"


def schema_path(name: str) -> Path:
    return SCHEMA_DIR / f"{name}.schema.json"


def stale_schemas() -> list[str]:
    """The schemas that differ from their models, are missing, or have no model left."""
    models = schema_models()
    stale = [
        name
        for name, model in models.items()
        if not schema_path(name).exists() or schema_path(name).read_text() != schema_text(model)
    ]
    orphans = [p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json")]
    return stale + sorted(set(orphans) - set(models))


def write_schemas() -> list[Path]:
    """Write every model's schema, and remove those no model writes any more."""
    SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
    models = schema_models()
    for old in SCHEMA_DIR.glob("*.schema.json"):
        if old.name.removesuffix(".schema.json") not in models:
            old.unlink()
    for name, model in models.items():
        schema_path(name).write_text(schema_text(model))
    return [schema_path(name) for name in models]


if __name__ == "__main__":
    for path in write_schemas():
        print(path.relative_to(paths.REPO_ROOT))
