"""A chat bot's memory through Recallatron's gRPC API, with nothing but the generated stubs
(docs/clients.md): remember what the user says to keep, recall it, and put the memories that matter
in front of the model before it answers.

    python examples/chat_bot.py --gateway localhost:50051 --token rct_...   # or RECALLATRON_TOKEN

One turn a line, from the keyboard or a pipe:

    /remember TEXT   stores TEXT as a memory of yours alone (Remember)
    /recall QUESTION the memories found for QUESTION, best first (Recall)
    /context         your context bundle: pinned, recent and most-mentioned memories (GetContext)
    /quit            (or end of input)
    anything else    a turn for the model: the memories recalled for it (PromptContext) go in its
                     prompt, after the context bundle, and the model answers

There is no language model here: ``answer`` stands in for one (it replies with the best memory the
block holds); put your model's call there. ``--show-prompt`` prints what the model would read.
It imports only grpcio and the stubs (``recallatron.gateway.v1``, ``recallatron.memory.v1``, installed
with the package), as a program of your own would.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m

SYSTEM = "You are a helpful assistant with a memory. Memories below are claims someone made: judge them."


class MemoryClient:
    """The calls a chat bot makes, as one member (the token's) and one conversation (``session``)."""

    def __init__(self, channel: grpc.Channel, token: str, session: str) -> None:
        self.stub = gateway_pb2_grpc.MemoryServiceStub(channel)
        self.metadata = (("authorization", f"Bearer {token}"),)  # every call carries the member's token
        self.session = session

    def remember(self, text: str) -> m.Memory:
        # Member-only: a chat bot's memories of one user are that user's, not the workspace's.
        request = g.RememberRequest(
            purpose=m.PURPOSE_CONVERSATION, kind=m.KIND_NOTE, body=text, audience=m.AUDIENCE_MEMBER
        )
        return self.stub.Remember(request, metadata=self.metadata).memory

    def recall(self, question: str, top_k: int = 5) -> g.RecallResponse:
        request = g.RecallRequest(query=question, purpose=m.PURPOSE_CONVERSATION, top_k=top_k)
        return self.stub.Recall(request, metadata=self.metadata)

    def bundle(self) -> str:
        """The context bundle's text, or "" when the workspace has it off (an operator's setting)."""
        try:
            request = g.GetContextRequest(purpose=m.PURPOSE_CONVERSATION)
            return self.stub.GetContext(request, metadata=self.metadata).text
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:  # reason CONTEXT_BUNDLE_OFF
                return ""
            raise

    def block(self, turn: str) -> g.PromptContextResponse:
        """The memories to put before the model for this turn: only those the relevance gate finds to
        be about it, each once per session (``session_key``), within the block's token budget."""
        request = g.PromptContextRequest(text=turn, purpose=m.PURPOSE_CONVERSATION, session_key=self.session)
        return self.stub.PromptContext(request, metadata=self.metadata)


def prompt(bundle: str, block: str, turn: str) -> str:
    """What the model reads: instructions, the standing context, the memories for this turn, the turn."""
    return "\n\n".join(part for part in (SYSTEM, bundle, block, f"User: {turn}") if part)


def answer(prompt_text: str, block: g.PromptContextResponse) -> str:
    """Stands in for the model: call yours with ``prompt_text`` here."""
    if block.items:
        return f"From memory: {block.items[0].memory.body}"
    if block.already_shown:  # put before the model earlier in this session: its history holds them
        return "I told you earlier in this conversation."
    return "I have nothing on that yet; tell me with /remember."


def chat(memory: MemoryClient, lines, out, show_prompt: bool = False) -> None:
    bundle = memory.bundle()  # once a session, as a system prompt would hold it
    for line in lines:
        turn = line.strip()
        if turn == "/quit":
            return
        if turn:
            try:
                one_turn(memory, turn, bundle, out, show_prompt)
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNAVAILABLE):
                    raise  # no later turn can do better: a bad token, or no gateway
                print(f"{exc.code().name}: {exc.details()}", file=sys.stderr)  # this turn only (bad input)


def one_turn(memory: MemoryClient, turn: str, bundle: str, out, show_prompt: bool) -> None:
    command, _, rest = turn.partition(" ")
    if command == "/remember":
        stored = memory.remember(rest)
        print(f"remembered {stored.id}: {stored.body}", file=out)
    elif command == "/recall":
        found = memory.recall(rest)
        for item in found.items:
            print(f"{item.rank}. [{item.memory.id}] {item.memory.body} (cosine {item.cosine:.2f})", file=out)
        if not found.items:
            print("nothing recalled", file=out)
    elif command == "/context":
        print(memory.bundle() or "the context bundle is off for this workspace", file=out)
    else:
        block = memory.block(turn)
        text = prompt(bundle, block.text, turn)
        if show_prompt:
            print(f"--- prompt ---\n{text}\n--- end of prompt ---", file=out)
        print(f"bot> {answer(text, block)}", file=out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gateway", default=os.environ.get("RECALLATRON_GATEWAY_ADDR", "localhost:50051"))
    p.add_argument("--token", default=os.environ.get("RECALLATRON_TOKEN"), help="a member token (rct_...)")
    p.add_argument("--session", default=str(uuid.uuid4()), help="names the conversation (default: a new one)")
    p.add_argument("--show-prompt", action="store_true", help="print what the model would read for each turn")
    args = p.parse_args(argv)
    if not args.token:
        p.error("a member token is needed: --token or RECALLATRON_TOKEN (`recallatron member add --json`)")
    with grpc.insecure_channel(args.gateway) as channel:
        try:
            chat(MemoryClient(channel, args.token, args.session), sys.stdin, sys.stdout, args.show_prompt)
        except grpc.RpcError as exc:
            print(f"{exc.code().name}: {exc.details()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
