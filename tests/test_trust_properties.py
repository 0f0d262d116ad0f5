"""The trust model's properties (tests/trust_program.py says what each example runs and asserts):
the first half of the leak property's examples, and the curation lists. The second half is
tests/test_trust_properties_more.py, so that the two halves run on two workers side by side."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trust_program import (
    EXAMPLES,
    FIRST_HALF,
    curation_example,
    curation_ops,
    grant_sets,
    leak_example,
    ops,
    property_test,
)


@pytest.fixture(scope="module")
def property_workspace(stack):
    """One workspace each example starts from emptied (``Stack.emptied``: as a new one), not a new
    database an example."""
    return stack.workspace("property")


@pytest.fixture(scope="module")
def curation_workspace(stack):
    return stack.workspace("property curation")


@property_test(FIRST_HALF)
@given(program=ops, grants=grant_sets, gate=st.booleans())
def test_nothing_ineligible_leaks_and_everything_eligible_is_found(stack, property_workspace, program, grants, gate):
    leak_example(stack, property_workspace, program, grants, gate)


@property_test(max(EXAMPLES // 5, 10))
@given(program=curation_ops, grants=grant_sets)
def test_curation_lists_hold_exactly_the_readable_pairs_and_flags(stack, curation_workspace, program, grants):
    """Longer programs of writes and curation (remembers, supersedes, derivations, imports, forgets,
    duplicate decisions and flag resolutions by three members, one admin), each status the model's;
    then every member's ListDuplicateProposals and ListConflictFlags hold and count exactly the
    model's pairs and flags among what the member may read, and ListMemories the readable memories."""
    curation_example(stack, curation_workspace, program, grants)
