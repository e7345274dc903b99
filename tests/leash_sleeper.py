"""A process that does nothing until it is ended: the leash tests' child (engine/proc/leash.py)."""

import time

while True:
    time.sleep(1)
