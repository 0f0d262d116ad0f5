"""One memory as text for a model or a prompt: provenance and dates before the text.

Each memory is one header line (id, revision, kind, origin and author, creation and change times,
when the event happened if known, audience, purpose, confidence), one provenance line when it has
links, a successor or capture evidence, then its title and body. What a reader needs to judge a
claim comes before the claim. The MCP tools (mcp_server/render.py) and the context bundle
(gateway/context.py) both render memories with ``memory``.
"""

from __future__ import annotations

import datetime

from google.protobuf import timestamp_pb2
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.vocabulary import name_of


def when(ts: timestamp_pb2.Timestamp) -> str:
    """A timestamp as ISO 8601 UTC to the second, e.g. ``2026-12-01T04:39:41+00:00``."""
    return ts.ToDatetime(tzinfo=datetime.UTC).isoformat(timespec="seconds")


def memory(mem: m.Memory) -> str:
    """One memory: header line, provenance line (if any), earlier revisions (if read), then title and body."""
    if mem.forgotten:
        return f"[{mem.id}] forgotten on {when(mem.updated_at)}: {mem.invalidation_reason or 'no reason kept'}"
    audience = "workspace" if mem.audience == m.AUDIENCE_WORKSPACE else f"private to member {mem.audience_member_id}"
    head = (
        f"[{mem.id}] revision {mem.revision} | {name_of(m.Kind, mem.kind)}, {name_of(m.Origin, mem.origin)} "
        f"by member {mem.created_by} | created {when(mem.created_at)}"
    )
    if mem.updated_at != mem.created_at:
        head += f", changed {when(mem.updated_at)}"
    if mem.HasField("occurred_at"):
        head += f" | happened {when(mem.occurred_at)}"
    head += f" | {audience} | {name_of(m.Purpose, mem.purpose)} | confidence {mem.confidence:.2f}"
    provenance = [f"derived from {link.target_memory_id}" for link in mem.links if link.target_memory_id]
    provenance += [
        f"about {link.target_entity_name} ({link.target_entity_id})" for link in mem.links if link.target_entity_id
    ]
    if mem.superseded_by_id:
        provenance.append(f"superseded by {mem.superseded_by_id}")
    if mem.evidence.span:
        provenance.append(f"captured from the turn's words {mem.evidence.span!r}")
    lines = [head]
    if provenance:
        lines.append("  " + "; ".join(provenance))
    lines += [
        f"  earlier revision {rev.revision} (replaced {when(rev.replaced_at)}): {rev.body}" for rev in mem.history
    ]
    lines.append(f"  {mem.title}: {mem.body}" if mem.title else f"  {mem.body}")
    return "\n".join(lines)
