"""The choices a client offers and checks before it sends: the short enum names of
``servicekit.vocabulary`` (name -> proto value, in the proto's declaration order, which is also the
order a command's --help lists them in)."""

from __future__ import annotations

from recallatron.memory.v1 import memory_pb2 as m

from servicekit import vocabulary

PURPOSES = vocabulary.values(m.Purpose)
KINDS = vocabulary.values(m.Kind)
MODES = vocabulary.values(m.RecallMode)
AUDIENCES = vocabulary.values(m.Audience)
ROLES = vocabulary.values(m.Role)
SUPERSEDED = vocabulary.values(m.SupersededFilter)
