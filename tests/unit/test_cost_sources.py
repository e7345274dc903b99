"""What the Cost page shows: sources named by their titles, and the noise judgement's words."""

from __future__ import annotations

import ast

import pytest

from engine.base import paths
from engine.cost import published, report
from engine.cost.stats import steadiness
from engine.cost.throughput import Matrix, Trial

# Words of the project's own bookkeeping that mean nothing to a room.
INTERNAL = ("seed 0", "issue ", "not in seeds")
README = paths.REPO_ROOT / "benchmarks" / "README.md"


def internal_words(text: str) -> list[str]:
    return [word for word in INTERNAL if word in text.lower()]


def test_claims_name_their_sources_by_title():
    for claim in published.CLAIMS:
        for text in (claim.what, claim.figure, claim.conditions, claim.source):
            assert not internal_words(text), (claim.key, text)
    assert "Exactly-once Semantics are Possible" in published.claim("eos_vs_alo").source
    assert '"Advanced Kafka"' in published.claim("read_committed_delay").source
    for row in report.claim_rows(None, None):
        assert not internal_words(" ".join(map(str, row.values()))), row


def test_no_page_string_uses_internal_words():
    for page in sorted((paths.REPO_ROOT / "pages").glob("*.py")):
        for node in ast.walk(ast.parse(page.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not internal_words(node.value), (page.name, node.value)


def test_the_full_run_block_the_page_shows_uses_titles():
    block = README.read_text().split("<!-- cost-results:start -->", 1)[1]
    block = block.split("<!-- cost-results:end -->", 1)[0]
    assert not internal_words(block)


def matrix(rates: dict[str, list[float]]) -> Matrix:
    trials = [
        Trial(label, 1024, r, f"t-{label}-{r}", 1000, 1000, 0, 1000 / rate)
        for label, by_round in rates.items()
        for r, rate in enumerate(by_round)
    ]
    return Matrix(trials)


def test_a_noisy_run_says_so_with_its_own_spread():
    m = matrix({"at-least-once": [100.0, 150.0, 90.0], "idempotent-only": [50.0, 52.0, 51.0]})
    judged = report.quick_steadiness(m)
    assert not judged.comparable
    text = report.steadiness_text(judged)
    assert text.startswith("This quick run is too noisy to compare: spreads up to ±50%")
    assert "(at-least-once)" in text


def test_a_flipped_round_is_named():
    judged = steadiness({"a": [100.0, 100.0, 88.0], "b": [80.0, 80.0, 90.0]})
    text = report.steadiness_text(judged)
    assert "too noisy" in text and "round 3: b at least as fast as a" in text


def test_a_steady_run_says_the_rounds_agree():
    m = matrix({"acks=1": [100.0, 104.0, 98.0], "transactional": [60.0, 62.0, 58.0]})
    text = report.steadiness_text(report.quick_steadiness(m))
    assert text.startswith("The rounds agree: every setup's spread is within ±4%")


@pytest.mark.parametrize("rates", [[100.0], [100.0, 100.0]])
def test_identical_rounds_have_no_spread(rates):
    assert report.quick_steadiness(matrix({"a": rates})).widest == ("a", 0.0)
