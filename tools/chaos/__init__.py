"""Chaos run: ``kill -9`` each part of a running system under a write load, then check what survived.

``make chaos`` (``python -m tools.chaos --seconds 20``) starts its own ``recallatron up`` (embedded
PostgreSQL, four services, free ports, a temporary data folder) and, for each target in turn (the
store service, the gateway, the embed service, PostgreSQL), runs ``--clients`` members writing
through the gateway (``tools/chaos/load.py``) for ``--seconds``, kills the target with SIGKILL,
keeps writing while ``up`` restarts it, writes ``--seconds`` more once a write sent after the kill
is acknowledged, stops the load, waits for the embedding backlog to drain and checks
(``tools/chaos/check.py``). It prints, per kill: writes acknowledged (by operation) and found after
the restart, memories forgotten and still forgotten, half-written rows, unknown rows, live memories
without a vector, and the times from the kill until the target answered again, until a write sent
after the kill was acknowledged, and from the end of the load until the embeddings caught up.
tests/test_chaos.py runs the same with a few seconds of load per kill.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc

from servicekit import clients as channels
from store_service.database import new_db_name
from tools.chaos.check import half_written, still_forgotten, stored_as_modelled, vectors_missing
from tools.chaos.load import GIVE_UP_SECONDS, Client
from tools.chaos.stack import TARGETS, UpStack, wait_for

RECOVER_SECONDS = 600.0  # generous: a restart on a loaded 2-core machine (the embed service loads MiniLM)
CATCH_UP_SECONDS = 900.0


@dataclass
class Phase:
    """What one kill did and what the checks found after it."""

    target: str
    acknowledged: Counter  # acknowledged writes of this phase, by operation
    found: int  # of those, the ones whose memories are stored as acknowledged
    forgotten: int  # memories forgotten so far (all phases)
    still_forgotten: int
    half_written: dict[str, int]
    unknown_rows: int
    vectors_missing: int
    back_seconds: float
    resumed_seconds: float
    caught_up_seconds: float
    retried: Counter = field(default_factory=Counter)
    unexpected: Counter = field(default_factory=Counter)

    def as_json(self) -> dict:
        """The figures as plain JSON values, ``ok`` included. Not ``dataclasses.asdict``: it rebuilds a
        Counter from (key, value) pairs, which a Counter counts as tuple keys that JSON refuses."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {k: dict(v) if isinstance(v, dict) else v for k, v in fields.items()} | {"ok": self.ok}

    @property
    def ok(self) -> bool:
        return (
            self.found == sum(self.acknowledged.values())
            and self.forgotten == self.still_forgotten
            and not any(self.half_written.values())
            and self.unknown_rows == 0
            and self.vectors_missing == 0
            and not self.unexpected
        )


def _counter_delta(now: Counter, before: Counter) -> Counter:
    return Counter({k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)})


def _load(clients: list[Client], stop: threading.Event, failures: list[BaseException]) -> list[threading.Thread]:
    def run(client: Client) -> None:
        try:
            client.run(stop)
        except BaseException as exc:  # noqa: BLE001 - reported by the phase
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(c,), name=f"chaos-client-{c.index}") for c in clients]
    for t in threads:
        t.start()
    return threads


def _acked_after(clients: list[Client], label: str, moment: float) -> list[float]:
    """When the writes of phase ``label`` sent after ``moment`` were acknowledged (a write sent
    before a kill and answered just after it says nothing about recovery)."""
    return [a.at for c in clients for a in c.acks if a.phase == label and a.sent > moment]


def _backlog(admin, metadata) -> int:
    try:
        return admin.GetStatus(g.GetStatusRequest(), metadata=metadata, timeout=30).embedding_backlog
    except Exception:  # noqa: BLE001 - still coming back: keep polling
        return -1


def kill_phase(stack: UpStack, clients: list[Client], workspace_id: str, target: str, seconds: float, label: str):
    """Load, kill -9 of ``target``, load through its restart, then the checks; returns a Phase."""
    admin = gateway_pb2_grpc.AdminServiceStub(clients[0].channel)
    op_md = stack.operator()
    retried = sum((c.retried for c in clients), Counter())
    unexpected = sum((c.unexpected for c in clients), Counter())
    for c in clients:
        c.phase = label
    stop, failures = threading.Event(), []
    threads = _load(clients, stop, failures)
    try:
        time.sleep(seconds)
        killed, at = stack.kill(target)
        back = wait_for(lambda: stack.back(target, killed), RECOVER_SECONDS, f"{target} back after kill -9")
        wait_for(
            lambda: bool(_acked_after(clients, label, at)), RECOVER_SECONDS, "a write sent after the kill acknowledged"
        )
        resumed = min(_acked_after(clients, label, at))
        time.sleep(seconds)
    finally:
        stop.set()
        for t in threads:
            t.join(GIVE_UP_SECONDS + 60)
    if failures:
        raise RuntimeError(f"a chaos client failed: {failures[0]!r}") from failures[0]
    load_end = time.monotonic()
    caught_up = wait_for(lambda: _backlog(admin, op_md) == 0, CATCH_UP_SECONDS, "embedding backlog drained", 0.5)
    with psycopg.connect(stack.conninfo(new_db_name(uuid.UUID(workspace_id))), autocommit=True) as conn:
        good, unknown = stored_as_modelled(conn, clients)
        half = half_written(conn)
        missing = vectors_missing(conn)
    acks = [a for c in clients for a in c.acks if a.phase == label]
    forgotten, gone = still_forgotten(clients)
    return Phase(
        target=target,
        acknowledged=Counter(a.op for a in acks),
        found=sum(all(mid in good for mid in a.memory_ids) for a in acks),
        forgotten=forgotten,
        still_forgotten=gone,
        half_written=half,
        unknown_rows=unknown,
        vectors_missing=missing,
        back_seconds=back - at,
        resumed_seconds=resumed - at,
        caught_up_seconds=caught_up - load_end,
        retried=_counter_delta(sum((c.retried for c in clients), Counter()), retried),
        unexpected=_counter_delta(sum((c.unexpected for c in clients), Counter()), unexpected),
    )


def _members(stack: UpStack, count: int) -> tuple[str, list[g.AddMemberResponse]]:
    channel = channels.channel(stack.addrs["gateway"])
    try:
        admin = gateway_pb2_grpc.AdminServiceStub(channel)
        md = stack.operator()
        ws = admin.CreateWorkspace(g.CreateWorkspaceRequest(name="chaos"), metadata=md, timeout=60).workspace_id
        members = [
            admin.AddMember(g.AddMemberRequest(workspace_id=ws, display_name=f"chaos {i}"), metadata=md, timeout=60)
            for i in range(count)
        ]
        return ws, members
    finally:
        channel.close()


def run(
    seconds: float,
    clients: int = 8,
    targets=TARGETS,
    rounds: int = 1,
    home: Path | None = None,
    report=print,
) -> list[Phase]:
    """Runs the kills in order (``rounds`` times) and returns one Phase per kill; ``report`` gets a
    line as each step is done. A temporary ``home`` is removed afterwards."""
    temporary = home is None
    home = Path(tempfile.mkdtemp(prefix="recallatron-chaos-")) if temporary else home
    report(f"chaos: starting recallatron up in {home}")
    stack: UpStack | None = None
    writers: list[Client] = []
    try:
        stack = UpStack.start(home)
        ws, members = _members(stack, clients)
        writers = [Client(i, mem.member_id, mem.token, stack.addrs["gateway"], seed=i) for i, mem in enumerate(members)]
        report(f"chaos: ready; {clients} clients write for {seconds:g} s before and after each kill -9")
        phases = []
        for r in range(rounds):
            for target in targets:
                phase = kill_phase(stack, writers, ws, target, seconds, f"{r}:{target}")
                report(line(phase))
                phases.append(phase)
        return phases
    finally:
        for w in writers:
            w.close()
        if stack is not None:
            status = stack.stop()
            report(f"chaos: recallatron up stopped (exit status {status}); its log: {stack.log_path}")
        if temporary:
            shutil.rmtree(home, ignore_errors=True)


def line(p: Phase) -> str:
    """One phase as a line of the report."""
    ops = ", ".join(f"{op} {p.acknowledged[op]}" for op in ("remember", "correct", "supersede", "forget"))
    half = sum(p.half_written.values())
    retried = ", ".join(f"{k} {v}" for k, v in sorted(p.retried.items())) or "none"
    text = (
        f"kill -9 {p.target}: acknowledged {sum(p.acknowledged.values())} ({ops}), found after restart {p.found}; "
        f"forgotten {p.forgotten}, still forgotten {p.still_forgotten}; half-written {half}; "
        f"unknown rows {p.unknown_rows}; vectors missing {p.vectors_missing}; "
        f"back after {p.back_seconds:.1f} s, writes resumed after {p.resumed_seconds:.1f} s, "
        f"embeddings caught up {p.caught_up_seconds:.1f} s after the load; calls retried: {retried}"
    )
    for name, n in p.half_written.items():
        if n:
            text += f"\n  half-written: {name}: {n}"
    for what, n in p.unexpected.items():
        text += f"\n  unexpected answer ({n}x): {what}"
    return text


def table(phases: list[Phase]) -> str:
    """The figures side by side, one row per kill."""
    head = (
        f"{'kill -9':10} {'acked':>6} {'found':>6} {'forgot':>6} {'still':>6} {'half':>5} {'unknown':>7} "
        f"{'no-vec':>6} {'back s':>7} {'resume s':>8} {'vectors s':>9}  ok"
    )
    rows = [
        f"{p.target:10} {sum(p.acknowledged.values()):>6} {p.found:>6} {p.forgotten:>6} {p.still_forgotten:>6} "
        f"{sum(p.half_written.values()):>5} {p.unknown_rows:>7} {p.vectors_missing:>6} {p.back_seconds:>7.1f} "
        f"{p.resumed_seconds:>8.1f} {p.caught_up_seconds:>9.1f}  {'yes' if p.ok else 'NO'}"
        for p in phases
    ]
    return "\n".join([head, *rows])
