"""The second half of the leak property's examples (tests/trust_program.py): a test of another name,
so that Hypothesis derandomizes it to other examples than the first half's
(tests/test_trust_properties.py), and a file of its own, so that a second worker runs it."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trust_program import SECOND_HALF, grant_sets, leak_example, ops, property_test


@pytest.fixture(scope="module")
def property_workspace(stack):
    return stack.workspace("property, second half")


@property_test(SECOND_HALF)
@given(program=ops, grants=grant_sets, gate=st.booleans())
def test_nothing_ineligible_leaks_in_the_second_half_of_the_examples(stack, property_workspace, program, grants, gate):
    leak_example(stack, property_workspace, program, grants, gate)
