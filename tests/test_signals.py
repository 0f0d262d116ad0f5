"""Stopping on signals: the handler takes no lock, so signals close together never deadlock
(servicekit.signals). Found in a full test run: a `recallatron serve rank` that got SIGTERM twice
hung in nested handlers, each calling threading.Event.set(), and never stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import ROOT, free_port

from servicekit import clients


def test_a_signal_while_the_event_lock_is_held_still_stops():
    """The main thread holds the event's condition lock (as inside Event.wait or Event.set) when
    signals arrive: the old handler (``lambda *_: stop.set()``) blocks there forever; this one
    returns, and the event is set from another thread."""
    script = textwrap.dedent(
        """
        import os, signal
        from servicekit.signals import stop_on_signals
        stop = stop_on_signals()
        with stop._cond:
            for _ in range(5):
                os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
        print("stopped" if stop.wait(10) else "not stopped")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / 'gen'}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == "stopped", out.stderr


@pytest.mark.system
def test_a_service_flooded_with_sigterm_stops_cleanly(tmp_path):
    addr = f"127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECALLATRON_") and k != "DATABASE_URL"}
    env.update(
        {
            "RECALLATRON_HOME": str(tmp_path),
            "RECALLATRON_RANK_ADDR": addr,
            "RECALLATRON_RANK_METRICS_PORT": "0",
            "PYTHONPATH": f"{ROOT}:{ROOT / 'gen'}",
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "rank"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        channel = clients.channel(addr)
        deadline = time.monotonic() + 60
        while not clients.is_serving(channel) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
        channel.close()
        for _ in range(50):
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert "rank stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
