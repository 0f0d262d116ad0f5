"""Stopping on SIGTERM and SIGINT without taking a lock in the signal handler.

CPython runs a Python signal handler in the main thread, between two bytecodes of whatever it was
doing, and that may be inside ``threading.Event.wait`` or ``Event.set`` holding the event's
condition lock, a lock that cannot be taken twice. A handler that calls ``Event.set()`` itself then
deadlocks the main thread when a second signal arrives while the first handler holds that lock:
found in a full test run, a ``recallatron serve rank`` that got SIGTERM twice (its supervisor
killed) hung in three nested handlers and never stopped. So the handler here only writes a byte to
a pipe (a system call, no lock), and a daemon thread blocked on the pipe sets the event.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_on_signals(signals=STOP_SIGNALS) -> threading.Event:
    """Installs handlers for ``signals`` (main thread only, as ``signal.signal`` requires) and
    returns an event that is set, from another thread, once any of them arrives; any number of
    further signals, however close together, are harmless."""
    stop = threading.Event()
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def relay() -> None:
        os.read(read_end, 1)
        stop.set()

    def handler(signum, frame) -> None:
        try:
            os.write(write_end, b"\0")
        except OSError:  # the pipe is full (thousands of signals): one byte is enough
            pass

    threading.Thread(target=relay, name="stop-signal", daemon=True).start()
    for sig in signals:
        signal.signal(sig, handler)
    return stop


def die_with_parent() -> None:
    """In the child: receive SIGTERM when the supervisor dies, even by SIGKILL (Linux prctl)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
