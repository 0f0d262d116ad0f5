"""The chaos run's write load: clients that Remember, Correct, Supersede and Forget through the
gateway, each in its own thread as its own member, keeping a model of what the store must hold.

A client counts a write as acknowledged only when the gateway answered OK. A write whose answer was
lost (UNAVAILABLE or a deadline while something is down) is settled before the client goes on, as a
careful client would: Remember, Supersede and Forget are sent again until answered (the first two
under the same ``request_id``, so the retry returns the first result instead of writing twice;
Forget is idempotent), and a Correct, which has no request id, is settled by reading the memory.
So when the load stops, every write that reached the database is in some client's model.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m

from client import bearer
from servicekit import clients

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
CALL_SECONDS = 30.0  # deadline of one call
GIVE_UP_SECONDS = 600.0  # a write still unanswered after this long fails the run
RETRY_PAUSE_SECONDS = 0.2
# Shares of the operations while the client has live memories (Remember otherwise).
WEIGHTS = {"remember": 45, "correct": 25, "supersede": 15, "forget": 15}


class GaveUp(RuntimeError):
    """A write that got no answer within GIVE_UP_SECONDS."""


def marker() -> str:
    """A fresh nonsense word: a lexical recall of it finds exactly the memory text that carries it."""
    return "zq" + uuid.uuid4().hex[:12]


@dataclass
class Known:
    """What the store must hold for one memory, by the answers the client got."""

    revision: int
    body: str
    markers: list[str]  # every word this memory's text has carried (a forget must erase them all)
    state: str = "live"  # live, superseded or forgotten
    successor: str = ""


@dataclass
class Ack:
    """One acknowledged write: its phase, operation, when the attempt that was answered was sent and
    when it was answered (monotonic seconds), and the memories it must show in."""

    phase: str
    op: str
    sent: float
    at: float
    memory_ids: tuple[str, ...]


@dataclass
class Client:
    """One member writing in a loop; ``mine`` is its model, ``acks`` its acknowledged writes."""

    index: int
    member_id: str
    token: str
    gateway_addr: str
    seed: int
    mine: dict[str, Known] = field(default_factory=dict)
    acks: list[Ack] = field(default_factory=list)
    retried: Counter = field(default_factory=Counter)  # status codes that made a call go again
    unexpected: Counter = field(default_factory=Counter)  # "op CODE: message" of answers no write should get
    settled_by_read: int = 0
    phase: str = ""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.channel = clients.channel(self.gateway_addr)
        self.stub = gateway_pb2_grpc.MemoryServiceStub(self.channel)
        self.md = bearer(self.token)
        self.seq = 0
        self.sent = 0.0  # when the attempt last answered was sent

    def run(self, stop: threading.Event) -> None:
        """Writes until ``stop`` is set; the write under way is settled before returning."""
        while not stop.is_set():
            self.step()

    def step(self) -> None:
        live = [mid for mid, k in self.mine.items() if k.state == "live"]
        op = self.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0] if live else "remember"
        if op == "remember":
            self.remember()
        else:
            getattr(self, op)(self.rng.choice(live))

    def _ack(self, op: str, *memory_ids: str) -> None:
        self.acks.append(Ack(self.phase, op, self.sent, time.monotonic(), memory_ids))

    def _answered(self, op: str, call, request):
        """Sends ``request`` until it is answered; returns the response, or None after recording an
        answer no write of this load should get."""
        deadline = time.monotonic() + GIVE_UP_SECONDS
        while True:
            self.sent = time.monotonic()
            try:
                return call(request, metadata=self.md, timeout=CALL_SECONDS)
            except grpc.RpcError as exc:
                if exc.code() not in RETRYABLE:
                    self.unexpected[f"{op} {exc.code().name}: {exc.details()}"] += 1
                    return None
                self.retried[exc.code().name] += 1
            if time.monotonic() > deadline:
                raise GaveUp(f"client {self.index}: {op} unanswered for {GIVE_UP_SECONDS:.0f} s")
            time.sleep(RETRY_PAUSE_SECONDS)

    def _text(self) -> tuple[str, str]:
        word = marker()
        self.seq += 1
        return word, f"{word} chaos note {self.index}-{self.seq} written under load"

    def remember(self) -> None:
        word, body = self._text()
        request_id = f"chaos-{self.index}-{self.seq}"
        req = g.RememberRequest(
            purpose=m.PURPOSE_CONVERSATION,
            title="chaos",
            body=body,
            audience=m.AUDIENCE_WORKSPACE,
            request_id=request_id,
        )
        resp = self._answered("remember", self.stub.Remember, req)
        if resp is not None:
            self.mine[resp.memory.id] = Known(1, body, [word])
            self._ack("remember", resp.memory.id)

    def correct(self, memory_id: str) -> None:
        known = self.mine[memory_id]
        word, body = self._text()
        req = g.CorrectRequest(id=memory_id, expected_revision=known.revision, body=body)
        self.sent = time.monotonic()
        try:
            resp = self.stub.Correct(req, metadata=self.md, timeout=CALL_SECONDS)
        except grpc.RpcError as exc:
            if exc.code() in RETRYABLE:
                self.retried[exc.code().name] += 1
            else:
                self.unexpected[f"correct {exc.code().name}: {exc.details()}"] += 1
            self._settle(memory_id, word)
            return
        known.revision, known.body = resp.memory.revision, body
        known.markers.append(word)
        self._ack("correct", memory_id)

    def _settle(self, memory_id: str, word: str) -> None:
        """After a Correct without an answer: reads the memory (until answered) and takes its state."""
        resp = self._answered("read", self.stub.Read, g.ReadRequest(id=memory_id))
        if resp is None:
            return
        known = self.mine[memory_id]
        known.revision, known.body = resp.memory.revision, resp.memory.body
        if word in resp.memory.body:
            known.markers.append(word)
        self.settled_by_read += 1

    def supersede(self, memory_id: str) -> None:
        known = self.mine[memory_id]
        word, body = self._text()
        req = g.SupersedeRequest(
            id=memory_id, expected_revision=known.revision, body=body, request_id=f"chaos-{self.index}-{self.seq}"
        )
        resp = self._answered("supersede", self.stub.Supersede, req)
        if resp is not None:
            known.state, known.successor = "superseded", resp.memory.id
            self.mine[resp.memory.id] = Known(1, body, [word])
            self._ack("supersede", memory_id, resp.memory.id)

    def forget(self, memory_id: str) -> None:
        resp = self._answered("forget", self.stub.Forget, g.ForgetRequest(id=memory_id, reason="chaos"))
        if resp is not None:
            self.mine[memory_id].state = "forgotten"
            # What it superseded takes its place (docs/time.md, "Validity"): superseded by the first
            # live memory down the chain, else current again.
            for known in self.mine.values():
                if known.state != "superseded" or self.mine[known.successor].state != "forgotten":
                    continue
                nxt = known.successor
                while nxt and self.mine[nxt].state == "forgotten":
                    nxt = self.mine[nxt].successor
                known.state, known.successor = ("superseded", nxt) if nxt else ("live", "")
            self._ack("forget", memory_id)

    def close(self) -> None:
        self.channel.close()
