"""The page walk's checks (walk_checks.py), each shown failing on a small page made to fail
it, beside the same page made right. Chromium only: no dashboard, no Kafka."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.e2e.walk_checks import (
    KeyNumber,
    broken_titles,
    key_number_off_screen,
    page_findings,
    small_type,
)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def tab() -> Iterator:
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        pytest.fail("Chromium is installed by `./lab test` (Debian package chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 720}, device_scale_factor=1.5)
        yield page
        browser.close()


def show(tab, body: str) -> None:
    tab.set_content(f"<html><body style='font-size:16px'>{body}</body></html>")


@pytest.mark.parametrize(
    ("wrong", "right", "found"),
    [
        (
            "<p>processor killed in commit_gap #2</p>",
            "<p>processor killed in the middle of its 2nd batch <small>commit_gap #2</small></p>",
            "an engine event name",
        ),
        (
            "<ul><li>commit failed with _FENCED: aborted</li></ul>",
            "<ul><li>commit failed: fenced <small><code>_FENCED</code></small></li></ul>",
            "a raw error code",
        ),
        (
            "<p>point LAB_METRICS_BOOTSTRAP at the cluster</p>",
            "<p>the run's records are read instead</p>",
            "environment variable",
        ),
        ("<p>batch None written</p>", "<p>batch 3 written</p>", '"batch None"'),
        ("<p>in-sync replicas [1, 3]</p>", "<p>in-sync replicas: nodes 1 and 3</p>", "list"),
        (
            "<div data-testid='stException'>Traceback (most recent call last): KeyError</div>",
            "<div>All good.</div>",
            "exception box",
        ),
        (
            "<table><tr><th>key</th><td>None</td></tr></table>",
            "<table><tr><th>key</th><td>a tombstone</td></tr></table>",
            '"None" cell',
        ),
        (
            "<canvas><table role='grid'><tr><td role='gridcell'>None</td></tr></table></canvas>",
            "<canvas><table role='grid'><tr><td role='gridcell'>-</td></tr></table></canvas>",
            '"None" cell',
        ),
        ("<button>Deploy</button>", "<button>Run</button>", '"Deploy"'),
    ],
)
def test_each_word_check_fails_on_its_case(tab, wrong, right, found):
    show(tab, wrong)
    assert any(found in line for line in page_findings(tab, projector=False)), wrong
    show(tab, right)
    assert page_findings(tab, projector=False) == []


def test_a_citation_is_no_list(tab):
    show(tab, "<p>Sources: [1] KIP-98: idempotent producer · [2] librdkafka</p>")
    assert page_findings(tab, projector=False) == []
    show(tab, "<p>led by node 1, in-sync replicas [1]</p>")
    assert any("a Python list" in line for line in page_findings(tab, projector=False))


def test_the_raw_name_may_follow_the_words_in_parentheses(tab):
    show(tab, "<p>outputs and input offsets out of step (commit_gap)</p>")
    assert page_findings(tab, projector=False) == []


def test_run_ids_and_topics_are_the_projectors_concern(tab):
    show(tab, "<p>Done: run 20261126-003155-ack-loss-8fe6, topic lab.20261126-x.in</p>")
    assert page_findings(tab, projector=False) == []
    found = page_findings(tab, projector=True)
    assert any("a run id" in line for line in found), found
    assert any("a topic name" in line for line in found), found


def test_a_code_block_keeps_its_words_but_not_the_projectors_names(tab):
    show(tab, "<pre>isr: [] -> [1] for lab.20261126-x.in-0 (REQUEST_TIMED_OUT)</pre>")
    assert page_findings(tab, projector=False) == []
    assert any("a topic name" in line for line in page_findings(tab, projector=True))


def test_hidden_text_is_not_on_the_screen(tab):
    show(tab, "<details><summary>Parameters</summary><p>commit_gap #2</p></details>")
    assert page_findings(tab, projector=False) == []


def test_a_word_broken_over_two_lines_is_found(tab):
    label = (
        "<div data-testid='stMetricLabel' style='width:{w}'><p style='{style}'>Delivered</p></div>"
    )
    show(tab, label.format(w="40px", style="word-break: break-all"))
    assert any('"Delivered" broken over' in line for line in broken_titles(tab))
    show(tab, label.format(w="200px", style=""))
    assert broken_titles(tab) == []


def test_a_cut_off_title_is_found(tab):
    label = (
        "<div data-testid='stMetricLabel'><p style='width:40px; overflow:hidden; "
        "white-space:nowrap; text-overflow:ellipsis'>{text}</p></div>"
    )
    show(tab, label.format(text="Duplicates"))
    assert any("cut off" in line for line in broken_titles(tab))
    show(tab, label.format(text="Dup"))
    assert broken_titles(tab) == []


def test_a_key_number_below_the_first_screen_is_found(tab):
    key = KeyNumber(".lab-number", "the first result number")
    show(tab, "<div style='height:900px'>story</div><div class='lab-number'>5</div>")
    where = key_number_off_screen(tab, key, timeout=0.5)
    assert where is not None and "the screen 720 px" in where, where
    show(tab, "<div style='height:200px'>story</div><div class='lab-number'>5</div>")
    assert key_number_off_screen(tab, key, timeout=0.5) is None
    show(tab, "<div>no result here</div>")
    assert "is not on the page" in (key_number_off_screen(tab, key, timeout=0.5) or "")


@pytest.mark.parametrize(
    ("wrong", "right"),
    [
        (
            "<div data-testid='stMetricLabel'><p style='font-size:17px'>Delivered</p></div>",
            "<div data-testid='stMetricLabel'><p style='font-size:24px'>Delivered</p></div>",
        ),
        (
            "<div class='lab-label' style='font-size:19px'>duplicates</div>",
            "<div class='lab-label' style='font-size:1.5rem'>duplicates</div>",
        ),
        (
            "<div data-testid='stTable'><table><tr><td style='font-size:16px'>3</td></tr></table>"
            "</div>",
            "<div data-testid='stTable'><table><tr><td style='font-size:24px'>3</td></tr></table>"
            "</div>",
        ),
        (
            "<div class='js-plotly-plot'><svg><text style='font-size:16px'>seconds</text>"
            "</svg></div>",
            "<div class='js-plotly-plot'><svg><text style='font-size:24px'>seconds</text>"
            "<g class='hoverlayer'><text style='font-size:12px'>id 3</text></g></svg></div>",
        ),
        (
            "<div class='js-plotly-plot'><svg><text style='font-size:24px'>acked "
            "<tspan style='font-size:11px'>ack</tspan></text></svg></div>",
            "<div class='js-plotly-plot'><svg><text style='font-size:24px'>acked</text>"
            "</svg></div>",
        ),
        (
            "<div data-testid='stDataFrame'><canvas width='200' height='40'></canvas></div>",
            "<div data-testid='stTable'><table><tr><td style='font-size:24px'>3</td></tr></table>"
            "</div>",
        ),
    ],
)
def test_small_type_on_the_projector_is_found(tab, wrong, right):
    show(tab, wrong)
    assert small_type(tab), wrong
    show(tab, right)
    assert small_type(tab) == [], right
