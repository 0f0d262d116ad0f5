"""The store's enum mappings (proto value <-> the string stored in PostgreSQL), and input checks.

The names come from ``servicekit.vocabulary`` (the generated descriptors); the migrations' CHECK
constraints list the same strings and stay the database's own guard."""

from __future__ import annotations

from recallatron.memory.v1 import memory_pb2 as m

from servicekit import vocabulary

# The input checks (servicekit.checks) and limits (servicekit.limits) are the clients' too (a file is
# checked before it is imported); the store's modules take them from here.
from servicekit.checks import check_confidence as check_confidence
from servicekit.checks import check_not_ahead as check_not_ahead
from servicekit.checks import check_text as check_text
from servicekit.checks import check_timestamp as check_timestamp
from servicekit.checks import enum_value as enum_value
from servicekit.checks import parse_uuid as parse_uuid
from servicekit.limits import MAX_BODY_BYTES as MAX_BODY_BYTES
from servicekit.limits import MAX_FUTURE_SKEW as MAX_FUTURE_SKEW
from servicekit.limits import MAX_REQUEST_ID_CHARS as MAX_REQUEST_ID_CHARS

KINDS = vocabulary.names(m.Kind)
PURPOSES = vocabulary.names(m.Purpose)
ORIGINS = vocabulary.names(m.Origin)
ROLES = vocabulary.names(m.Role)
MODES = vocabulary.names(m.RecallMode)

KIND_OF = vocabulary.values(m.Kind)
PURPOSE_OF = vocabulary.values(m.Purpose)
ORIGIN_OF = vocabulary.values(m.Origin)
ROLE_OF = vocabulary.values(m.Role)
MODE_OF = vocabulary.values(m.RecallMode)
