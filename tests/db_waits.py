"""Waiting, in a race test, until another session of the same database blocks on a lock."""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg


def wait_for_a_lock_wait(watch: psycopg.Connection, running: Callable[[], bool] = lambda: True, timeout=60.0) -> bool:
    """True once a session of ``watch``'s database waits on a lock; False when ``running()`` turns
    false (the other side finished without waiting) or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and running():
        waiting = watch.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()[0]
        if waiting:
            return True
        time.sleep(0.05)
    return False
