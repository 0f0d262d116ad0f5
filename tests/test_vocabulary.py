"""The one enum vocabulary: every enum in proto/ round-trips through its short names, the names are
exactly those the database's CHECK constraints allow, and bad values or badly named enums are refused."""

import importlib
import re
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.rank.v1 import rank_pb2 as r

from rank_service.server import _arms
from servicekit import vocabulary
from servicekit.caller import check_purpose_granted
from servicekit.errors import InvalidArgument, PermissionDenied
from store_service.vocabulary import KINDS, enum_value

ROOT = Path(__file__).resolve().parent.parent
PROTOS = sorted((ROOT / "proto").rglob("*.proto"))
MIGRATIONS = ROOT / "store_service" / "migrations"


def _nested_enums(messages):
    for message in messages:
        yield from message.enum_types
        yield from _nested_enums(message.nested_types)


def all_enums() -> dict[str, EnumTypeWrapper]:
    """Every enum declared in proto/ (top level or nested), by full name, from the generated modules."""
    found = {}
    for proto in PROTOS:
        module = importlib.import_module(".".join(proto.relative_to(ROOT / "proto").with_suffix("").parts) + "_pb2")
        for enum in [
            *module.DESCRIPTOR.enum_types_by_name.values(),
            *_nested_enums(module.DESCRIPTOR.message_types_by_name.values()),
        ]:
            found[enum.full_name] = EnumTypeWrapper(enum)
    return found


ENUMS = all_enums()


def test_every_enum_declared_in_proto_is_generated_and_covered():
    declared = {name for proto in PROTOS for name in re.findall(r"^\s*enum\s+(\w+)\s*\{", proto.read_text(), re.M)}
    assert declared == {name.rsplit(".", 1)[1] for name in ENUMS}
    assert {"Kind", "Purpose", "Audience", "Origin", "Role", "LinkType", "RecallMode", "Arm"} <= declared


@pytest.mark.parametrize("full_name", sorted(ENUMS))
def test_round_trip(full_name):
    enum = ENUMS[full_name]
    names, values = vocabulary.names(enum), vocabulary.values(enum)
    numbers = [v.number for v in enum.DESCRIPTOR.values]
    assert list(names) == [n for n in numbers if n != 0]  # every value but the zero one, in declaration order
    prefix = enum.Name(0)[: -len("UNSPECIFIED")]
    for number, name in names.items():
        assert values[name] == number
        assert enum.Value(prefix + name.upper()) == number
        assert vocabulary.name_of(enum, number) == name
    assert len(values) == len(names)
    assert vocabulary.name_of(enum, 0) == "unspecified"
    assert vocabulary.name_of(enum, max(numbers) + 1) == f"unknown ({max(numbers) + 1})"


def test_the_names_themselves():
    """The strings the CLI accepts and prints and the store writes: a contract, written out once here."""
    assert vocabulary.values(m.Kind) == {"note": 1, "fact": 2, "decision": 3, "summary": 4}
    assert vocabulary.values(m.Purpose) == {"conversation": 1, "tasks": 2, "reporting": 3, "administration": 4}
    assert vocabulary.values(m.Audience) == {"workspace": 1, "member": 2}
    assert vocabulary.values(m.Origin) == {"told": 1, "derived": 2, "migrated": 3}
    assert vocabulary.values(m.Role) == {"member": 1, "admin": 2}
    assert vocabulary.values(m.LinkType) == {"derived_from": 1, "about": 2}
    assert vocabulary.values(m.RecallMode) == {"lexical": 1, "dense": 2, "hybrid": 3}
    assert vocabulary.values(r.Arm) == {"lexical": 1, "dense": 2}


@pytest.mark.parametrize(
    "column, enum",
    [
        ("kind", m.Kind),
        ("purpose", m.Purpose),
        ("origin", m.Origin),
        ("link_type", m.LinkType),
        ("default_mode", m.RecallMode),
        ("role", m.Role),
        ("state", m.ConflictFlagState),
    ],
)
def test_sql_check_constraints_allow_exactly_the_vocabulary(column, enum):
    sql = "\n".join(p.read_text() for p in sorted(MIGRATIONS.rglob("*.sql")))
    lists = re.findall(rf"\b{column} text NOT NULL (?:DEFAULT '\w+' )?CHECK \({column} IN \(([^)]*)\)\)", sql)
    assert len(lists) == 1, lists
    assert re.findall(r"'(\w+)'", lists[0]) == list(vocabulary.names(enum).values())


def _pool_enum(values: list[tuple[str, int]]) -> EnumTypeWrapper:
    """An enum built in a private descriptor pool, to try naming rules the real protos never break."""
    proto = descriptor_pb2.FileDescriptorProto(name="bad.proto", package="bad")
    enum = proto.enum_type.add(name="Colour")
    for name, number in values:
        enum.value.add(name=name, number=number)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(proto.SerializeToString())
    return EnumTypeWrapper(pool.FindEnumTypeByName("bad.Colour"))


def test_an_enum_breaking_the_naming_rule_is_refused():
    with pytest.raises(ValueError, match="no zero value named"):
        vocabulary.names(_pool_enum([("COLOUR_NONE", 0), ("COLOUR_RED", 1)]))
    with pytest.raises(ValueError, match="lacks the prefix COLOUR_"):
        vocabulary.names(_pool_enum([("COLOUR_UNSPECIFIED", 0), ("RED", 1)]))
    assert vocabulary.values(_pool_enum([("COLOUR_UNSPECIFIED", 0), ("COLOUR_DARK_RED", 7)])) == {"dark_red": 7}


def test_unknown_or_unspecified_values_are_invalid_argument():
    assert enum_value(KINDS, m.KIND_DECISION, "kind") == "decision"
    for bad in (0, 99, -1):
        with pytest.raises(InvalidArgument, match="kind must be one of: decision, fact, note, summary"):
            enum_value(KINDS, bad, "kind")
    caller = m.Caller(granted_purposes=[m.PURPOSE_TASKS])
    assert check_purpose_granted(caller, m.PURPOSE_TASKS) == "tasks"
    with pytest.raises(InvalidArgument, match="purpose must be one of: administration, conversation, reporting, tasks"):
        check_purpose_granted(caller, m.PURPOSE_UNSPECIFIED)
    with pytest.raises(PermissionDenied, match="purpose reporting is not granted"):
        check_purpose_granted(caller, m.PURPOSE_REPORTING)
    assert _arms([r.ArmRanking(arm=r.ARM_DENSE, memory_ids=["a"])]) == {"dense": ["a"]}
    with pytest.raises(InvalidArgument, match="lexical or dense"):
        _arms([r.ArmRanking(arm=r.ARM_UNSPECIFIED, memory_ids=["a"])])


def test_confidence_bounds_and_negative_zero():
    from store_service.vocabulary import check_confidence

    assert [check_confidence(v) for v in (0.0, 0.5, 1.0)] == [0.0, 0.5, 1.0]
    assert str(check_confidence(-0.0)) == "0.0"  # was kept as -0.0 and printed as -0
    for bad in (-0.01, 1.01, float("nan"), float("inf")):
        with pytest.raises(InvalidArgument):
            check_confidence(bad)
