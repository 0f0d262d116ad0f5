"""The harness's free ports (``client.system.free_port``): below the kernel's ephemeral range, where
outgoing connections take their source ports, a slice of their own for each test worker, and never
the same one twice in a process. A port picked by ``bind(0)`` and bound a moment later by a service
was once taken meanwhile by another worker's service."""

from __future__ import annotations

import socket

from client import system


def test_ports_are_below_the_ephemeral_range_bindable_and_distinct(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    ports = [system.free_port() for _ in range(300)]
    assert len(set(ports)) == 300
    assert all(20000 <= p < system._ephemeral_low() for p in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))


def test_each_worker_has_a_slice_of_its_own(monkeypatch):
    seen = {}
    for worker in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
        seen[worker] = [system.free_port() for _ in range(50)]
    width = (system._ephemeral_low() - 20000) // 3
    for k, worker in enumerate(("gw0", "gw1", "gw2")):
        assert all(20000 + k * width <= p < 20000 + (k + 1) * width for p in seen[worker]), worker


def test_odd_worker_names_fall_back_to_the_whole_range(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "master")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "x")
    assert 20000 <= system.free_port() < system._ephemeral_low()


def test_a_low_ephemeral_range_or_very_many_workers_still_gives_ports(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "100")
    assert 20000 <= system.free_port() < max(system._ephemeral_low(), 32768)
    monkeypatch.setattr(system, "_ephemeral_low", lambda: 1024)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    ports = {system.free_port() for _ in range(20)}
    assert len(ports) == 20 and all(20000 <= p < 32768 for p in ports)
