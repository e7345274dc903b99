"""The recorded runs' whole folders (tests/data/recorded/runs/NAME.tar.gz, which the page walk
draws through Replay) are the runs whose results tests/data/recorded/NAME.json keeps."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from tests.data.record import RUNS, unpack_runs

RECORDED = Path(__file__).parent.parent / "data" / "recorded"


def archived_result(target: Path) -> dict:
    with tarfile.open(target) as archive:
        member = next(
            m
            for m in archive.getmembers()
            if m.name.count("/") == 1 and m.name.endswith("/result.json")
        )
        return json.loads(archive.extractfile(member).read())


def test_every_recorded_result_has_its_run_folder_and_they_agree():
    names = {p.stem for p in RECORDED.glob("*.json")}
    archived = {p.name.removesuffix(".tar.gz"): p for p in RUNS.glob("*.tar.gz")}
    assert set(archived) == names, "run `python -m tests.data.record NAME`"
    for name, target in archived.items():
        want = json.loads((RECORDED / f"{name}.json").read_text())
        got = archived_result(target)
        assert (got["run_id"], got["results"]) == (want["run_id"], want["results"]), name


def test_a_run_folder_from_another_run_is_told_apart(tmp_path):
    """The contrast: another scenario's folder under this name does not agree."""
    runs = unpack_runs(tmp_path / "runs")
    ack_loss = json.loads((RECORDED / "ack-loss.json").read_text())
    assert runs["ack-loss"] == ack_loss["run_id"]
    other = archived_result(RUNS / "zombie.tar.gz")
    assert (other["run_id"], other["results"]) != (ack_loss["run_id"], ack_loss["results"])
