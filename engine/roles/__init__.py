"""The clients of a run, each its own OS process so that a crash is a real SIGKILL.

    python -m engine.roles.producer SPEC.json
    python -m engine.roles.processor SPEC.json
    python -m engine.roles.sink SPEC.json

A spec is a JSON file the runner writes; every role appends its events to the history file
the spec names (see engine/model/history.py).
"""
