"""The share-group worker on the Java client (KafkaShareConsumer):
java/.../lab/share/JavaShareWorker.java, the twin of engine/roles/share_worker.py (the same
spec and events). Started by a share group's crew (engine/run/queue_crew.py): no level
plays a share group yet (issue 64)."""

from __future__ import annotations

from engine.roles.registry import Role
from engine.roles.share_worker import ROLE as PYTHON_WORKER
from engine.roles.specs import ShareWorkerSpec

ROLE = Role(
    name="java-share-worker",
    entry="lab.share.JavaShareWorker",
    java=True,
    part="worker",
    spec_model=ShareWorkerSpec,
    events=PYTHON_WORKER.events,
    about="A share group's member on the Java client (KafkaShareConsumer), explicit acks.",
    serves=lambda scenario, level: False,
)
