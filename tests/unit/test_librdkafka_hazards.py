"""No code of the lab calls the AdminClient's requests to a group coordinator.

librdkafka sends those (DescribeConsumerGroups, ListConsumerGroupOffsets,
AlterConsumerGroupOffsets, DeleteGroups, DeleteConsumerGroupOffsets) through
rd_kafka_admin_coord_request (rdkafka_admin.c). When it cannot send one to the coordinator
it found, it frees the request's state while the coordinator look-up still holds it, and
the process aborts on `eonce->refcnt > 0` (librdkafka issue 4605; fix proposed in PR 5397).
An abort takes the dashboard with it: it did once as the compose file's cluster started,
when engine.kafka.admin.load_coordinators described a group. The lab asks a coordinator
through a consumer or a transactional producer instead.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COORDINATOR_REQUESTS = (
    "describe_consumer_groups",
    "list_consumer_group_offsets",
    "alter_consumer_group_offsets",
    "delete_consumer_groups",
)
CALL = re.compile(r"\.(" + "|".join(COORDINATOR_REQUESTS) + r")\(")


def calls_to_coordinator_requests(text: str) -> list[str]:
    return CALL.findall(text)


def test_the_check_finds_the_call_that_aborted_the_dashboard():
    # The contrast: load_coordinators as it was when the dashboard aborted.
    before = "    client.describe_consumer_groups([COORDINATORS_KEY], request_timeout=5)\n"
    assert calls_to_coordinator_requests(before) == ["describe_consumer_groups"]


def test_no_code_of_the_lab_calls_them():
    sources = [ROOT / "app.py"] + [
        path
        for folder in ("engine", "pages", "benchmarks", "scenarios")
        for path in (ROOT / folder).rglob("*.py")
    ]
    found = {
        str(path.relative_to(ROOT)): calls
        for path in sources
        if (calls := calls_to_coordinator_requests(path.read_text()))
    }
    assert found == {}
