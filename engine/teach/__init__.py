"""What the room sees around a run: lessons and their steps (`lesson`), the picker's groups and
timings (`teaching`), the room's roles and votes (`room`, `vote`), the live lanes (`live`),
and docs/scenarios.md written from the files (`scenario_docs`).
"""
