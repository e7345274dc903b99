"""benchmarks.metrics_bench writes its block between METRICS.md's markers and nowhere else."""

import pytest

from benchmarks import metrics_bench as bench
from benchmarks.metrics_bench import END, START

TABLE = "| messages | Spark (s) |\n|---|---|\n"
OLD = (
    f"# The title\n\nProse.\n\n{START}\nMeasured then.\n\n{TABLE}"
    f"| 10,000 | 2.38 |\n| 1,000,000 | 20.63 |\n| 10,000,000 | 104.74 |\n\n{END}\n\nMore prose.\n"
)


def write(tmp_path, monkeypatch, text: str):
    report = tmp_path / "METRICS.md"
    report.write_text(text)
    monkeypatch.setattr(bench, "REPORT", report)
    return report


def test_a_full_run_replaces_the_block_and_keeps_the_title_first(tmp_path, monkeypatch):
    report = write(tmp_path, monkeypatch, OLD)
    bench.write_report(f"{START}\nMeasured now.\n\n{TABLE}| 10,000 | 1.00 |\n{END}")
    text = report.read_text()
    assert text.startswith("# The title\n")
    assert text.count(START) == 1 and text.count(END) == 1
    assert "Measured now." in text and "20.63" not in text and text.endswith("More prose.\n")


def test_a_partial_run_replaces_only_its_rows(tmp_path, monkeypatch):
    report = write(tmp_path, monkeypatch, OLD)
    new = f"{START}\nMeasured now.\n\n{TABLE}| 1,000,000 | 9.99 |\n{END}"
    bench.write_report(new, partial_note="Rows for 1,000,000 measured again.")
    text = report.read_text()
    assert text.startswith("# The title\n") and text.count(START) == 1
    assert "| 1,000,000 | 9.99 |" in text and "20.63" not in text
    assert "| 10,000 | 2.38 |" in text and "| 10,000,000 | 104.74 |" in text
    assert "Measured then." in text and "Measured now." not in text
    assert text.index("measured again") < text.index(END)
    # The contrast: the same block written as a full run drops the rows it did not measure.
    write(tmp_path, monkeypatch, OLD)
    bench.write_report(new)
    assert "| 10,000 | 2.38 |" not in report.read_text()


def test_a_size_measured_again_replaces_its_earlier_note(tmp_path, monkeypatch):
    """Each partial run adds a note saying which rows it measured and when; a later run of
    the same sizes replaces those rows, so its note replaces theirs. Other sizes' notes stay."""
    report = write(tmp_path, monkeypatch, OLD)
    rows = f"{START}\n{TABLE}| 10,000,000 | 65.92 |\n{END}"
    ten = "Rows for 10,000,000 messages measured again"
    bench.write_report(rows, partial_note=f"{ten} at 02:02.")
    one = f"{START}\n{TABLE}| 1,000,000 | 9.99 |\n{END}"
    bench.write_report(one, partial_note="Rows for 1,000,000 messages measured again at 03:00.")
    bench.write_report(rows, partial_note=f"{ten} at 03:49.")
    text = report.read_text()
    assert f"{ten} at 03:49." in text and "02:02" not in text
    assert "Rows for 1,000,000 messages measured again at 03:00." in text
    assert text.count(START) == 1 and "\n\n\n" not in text


def test_a_new_size_goes_after_the_tables_last_row(tmp_path, monkeypatch):
    report = write(tmp_path, monkeypatch, OLD)
    bench.write_report(f"{START}\n{TABLE}| 100,000 | 6.31 |\n{END}", partial_note="note")
    rows = [line for line in report.read_text().splitlines() if line.startswith("| 1")]
    assert rows[-1] == "| 100,000 | 6.31 |"


@pytest.mark.parametrize(
    "damaged",
    [OLD + f"\n{START}\nanother\n{END}\n", OLD.replace(START, "", 1), f"{END}\n{START}\n"],
    ids=["two blocks", "no start", "end first"],
)
def test_a_damaged_file_is_refused_not_guessed_at(tmp_path, monkeypatch, damaged):
    report = write(tmp_path, monkeypatch, damaged)
    with pytest.raises(SystemExit, match="one measured block"):
        bench.write_report(f"{START}\nnew\n{END}")
    assert report.read_text() == damaged  # nothing written


def test_a_file_without_a_block_gets_one_after_its_title(tmp_path, monkeypatch):
    report = write(tmp_path, monkeypatch, "# The title\n")
    bench.write_report(f"{START}\nnew\n{END}")
    assert report.read_text().startswith("# The title\n") and "new" in report.read_text()


def test_the_streaming_block_has_markers_of_its_own(tmp_path, monkeypatch):
    """benchmarks.streaming_bench writes between its own markers; the measured block and
    the prose around both stay as they were."""
    from benchmarks import streaming_bench

    report = write(tmp_path, monkeypatch, OLD)
    monkeypatch.setattr(streaming_bench, "REPORT", report)
    streaming_bench.write_block(f"{streaming_bench.START}\nfirst\n{streaming_bench.END}")
    streaming_bench.write_block(f"{streaming_bench.START}\nsecond\n{streaming_bench.END}")
    text = report.read_text()
    assert text.count(streaming_bench.START) == 1 and "first" not in text and "second" in text
    assert "| 10,000 | 2.38 |" in text and "More prose." in text
    assert text.index(END) < text.index(streaming_bench.START)
    # The measured block's own writer still finds exactly its block.
    bench.write_report(f"{START}\nMeasured now.\n\n{TABLE}| 10,000 | 1.00 |\n{END}")
    assert "second" in report.read_text() and "Measured now." in report.read_text()
