"""Time said in words (gateway/time_words.py): a table of time expressions, each with its reference
time and the window it must be read as, or None where the words only look like time ("May" the
name, "March" the verb, version and order numbers, a year inside an identifier)."""

from __future__ import annotations

import datetime

import pytest

from gateway.time_words import MAX_TRIES, understand

UTC = datetime.UTC
# Wednesday, 18 March 2026, 15:00 UTC.
REF = datetime.datetime(2026, 3, 18, 15, 0, tzinfo=UTC)
# Sunday, 7 January 2024, 09:30 UTC (the year's first week; a Sunday).
SUNDAY = datetime.datetime(2024, 1, 7, 9, 30, tzinfo=UTC)
# The same Wednesday at 22:30, when the evening has begun.
LATE = datetime.datetime(2026, 3, 18, 22, 30, tzinfo=UTC)
# 31 December 2023, 23:00 UTC (the year's last hour).
NEW_YEARS_EVE = datetime.datetime(2023, 12, 31, 23, 0, tzinfo=UTC)


def d(*parts: int) -> datetime.datetime:
    return datetime.datetime(*parts, tzinfo=UTC)


CASES = [
    # Days.
    ("what did we talk about yesterday?", REF, "yesterday", d(2026, 3, 17), d(2026, 3, 18)),
    ("anything from today", REF, "today", d(2026, 3, 18), d(2026, 3, 19)),
    ("Yesterday Ana called", REF, "Yesterday", d(2026, 3, 17), d(2026, 3, 18)),
    ("yesterday", SUNDAY, "yesterday", d(2024, 1, 6), d(2024, 1, 7)),
    ("yesterday", d(2024, 3, 1, 8), "yesterday", d(2024, 2, 29), d(2024, 3, 1)),  # leap day
    ("what was said 3 days ago", REF, "3 days ago", d(2026, 3, 15), d(2026, 3, 16)),
    ("two days ago", REF, "two days ago", d(2026, 3, 16), d(2026, 3, 17)),
    ("a day ago", REF, "a day ago", d(2026, 3, 17), d(2026, 3, 18)),
    ("on Monday", REF, "on Monday", d(2026, 3, 16), d(2026, 3, 17)),
    ("what did I say on Friday?", REF, "on Friday", d(2026, 3, 13), d(2026, 3, 14)),
    ("last Friday", REF, "last Friday", d(2026, 3, 13), d(2026, 3, 14)),
    ("last Tuesday's meeting", REF, "last Tuesday", d(2026, 3, 17), d(2026, 3, 18)),
    ("on 2023-05-08", REF, "on 2023-05-08", d(2023, 5, 8), d(2023, 5, 9)),
    ("notes of 2023-05-08", REF, "2023-05-08", d(2023, 5, 8), d(2023, 5, 9)),
    ("2024-02-29 call", REF, "2024-02-29", d(2024, 2, 29), d(2024, 3, 1)),
    ("the 5th of May", REF, "the 5th of May", d(2025, 5, 5), d(2025, 5, 6)),
    ("on May 5, 2023", REF, "on May 5, 2023", d(2023, 5, 5), d(2023, 5, 6)),
    ("5 May 2023", REF, "5 May 2023", d(2023, 5, 5), d(2023, 5, 6)),
    ("March 3rd", REF, "March 3rd", d(2026, 3, 3), d(2026, 3, 4)),
    ("on March 25", REF, "on March 25", d(2025, 3, 25), d(2025, 3, 26)),  # not yet this year: last year's
    ("Dec 24", REF, "Dec 24", d(2025, 12, 24), d(2025, 12, 25)),
    ("on 1 January", SUNDAY, "on 1 January", d(2024, 1, 1), d(2024, 1, 2)),
    ("the day before yesterday", REF, "the day before yesterday", d(2026, 3, 16), d(2026, 3, 17)),
    ("what came up day before yesterday", REF, "day before yesterday", d(2026, 3, 16), d(2026, 3, 17)),
    ("2 weeks and 3 days ago", REF, "2 weeks and 3 days ago", d(2026, 3, 1), d(2026, 3, 2)),
    ("two weeks, three days ago", REF, "two weeks, three days ago", d(2026, 3, 1), d(2026, 3, 2)),
    ("two weeks,three days ago", REF, "two weeks,three days ago", d(2026, 3, 1), d(2026, 3, 2)),
    ("2 years and 1 month ago", REF, "2 years and 1 month ago", d(2024, 2, 18), d(2024, 2, 19)),  # a day
    ("1 year, 2 months and 3 days ago", REF, "1 year, 2 months and 3 days ago", d(2025, 1, 15), d(2025, 1, 16)),
    # Parts of a day.
    ("this morning", REF, "this morning", d(2026, 3, 18, 5), d(2026, 3, 18, 12)),
    ("what came up this afternoon", REF, "this afternoon", d(2026, 3, 18, 12), d(2026, 3, 18, 17)),
    ("this evening", LATE, "this evening", d(2026, 3, 18, 17), d(2026, 3, 19)),
    ("tonight", LATE, "tonight", d(2026, 3, 18, 17), d(2026, 3, 19)),
    ("this evening", REF, None, None, None),  # at 15:00 the evening has not begun: nothing said in it yet
    ("last night", REF, "last night", d(2026, 3, 17, 18), d(2026, 3, 18, 6)),
    # Weeks.
    ("last week", REF, "last week", d(2026, 3, 9), d(2026, 3, 16)),
    ("what happened this week", REF, "this week", d(2026, 3, 16), d(2026, 3, 23)),
    ("the past week", REF, "past week", d(2026, 3, 9), d(2026, 3, 16)),
    ("previous week", REF, "previous week", d(2026, 3, 9), d(2026, 3, 16)),
    ("two weeks ago", REF, "two weeks ago", d(2026, 3, 2), d(2026, 3, 9)),
    ("2 weeks ago", REF, "2 weeks ago", d(2026, 3, 2), d(2026, 3, 9)),
    ("a week ago", REF, "a week ago", d(2026, 3, 9), d(2026, 3, 16)),
    ("last week", SUNDAY, "last week", d(2023, 12, 25), d(2024, 1, 1)),
    ("last weekend", REF, "last weekend", d(2026, 3, 14), d(2026, 3, 16)),
    ("this weekend", SUNDAY, "this weekend", d(2024, 1, 6), d(2024, 1, 8)),
    ("this weekend", REF, None, None, None),  # a Wednesday: the weekend is to come
    ("last weekend", SUNDAY, "last weekend", d(2023, 12, 30), d(2024, 1, 1)),
    # Months.
    ("what did we discuss about Nutrifax last month?", REF, "last month", d(2026, 2, 1), d(2026, 3, 1)),
    ("last month", SUNDAY, "last month", d(2023, 12, 1), d(2024, 1, 1)),
    ("this month", REF, "this month", d(2026, 3, 1), d(2026, 4, 1)),
    ("a month ago", REF, "a month ago", d(2026, 2, 1), d(2026, 3, 1)),
    ("three months ago", REF, "three months ago", d(2025, 12, 1), d(2026, 1, 1)),
    ("what did she say in March?", REF, "in March", d(2026, 3, 1), d(2026, 4, 1)),
    ("in May", REF, "in May", d(2025, 5, 1), d(2025, 6, 1)),
    ("during December", REF, "during December", d(2025, 12, 1), d(2026, 1, 1)),
    ("in February", REF, "in February", d(2026, 2, 1), d(2026, 3, 1)),
    ("early March", REF, "early March", d(2026, 3, 1), d(2026, 4, 1)),
    ("in late June", REF, "in late June", d(2025, 6, 1), d(2025, 7, 1)),
    ("March 2023", REF, "March 2023", d(2023, 3, 1), d(2023, 4, 1)),
    ("in March 2023", REF, "in March 2023", d(2023, 3, 1), d(2023, 4, 1)),
    ("June, 2023", REF, "June, 2023", d(2023, 6, 1), d(2023, 7, 1)),
    ("Sept 2022", REF, "Sept 2022", d(2022, 9, 1), d(2022, 10, 1)),
    ("plans for 2023-05", REF, "2023-05", d(2023, 5, 1), d(2023, 6, 1)),  # "for" is no time word: the month alone
    ("2023-05", REF, "2023-05", d(2023, 5, 1), d(2023, 6, 1)),
    ("in December", NEW_YEARS_EVE, "in December", d(2023, 12, 1), d(2024, 1, 1)),
    ("in May of 2023", REF, "in May of 2023", d(2023, 5, 1), d(2023, 6, 1)),
    ("in May '23", REF, "in May '23", d(2023, 5, 1), d(2023, 6, 1)),
    ("Nov '99 notes", REF, "Nov '99", d(1999, 11, 1), d(1999, 12, 1)),  # after the reference's '26: last century
    ("in March last year", REF, "in March last year", d(2025, 3, 1), d(2025, 4, 1)),
    ("the 5th of May 1850", REF, "the 5th of May 1850", d(1850, 5, 5), d(1850, 5, 6)),
    ("the 5th of May '23", REF, "the 5th of May '23", d(2023, 5, 5), d(2023, 5, 6)),
    ("May 5 '23", REF, "May 5 '23", d(2023, 5, 5), d(2023, 5, 6)),
    # A year after a month or day is read with it: a future one names nothing yet, never this year's.
    ("what did Kofi say in May of 2300", REF, None, None, None),
    ("May 5, 2300", REF, None, None, None),
    ("June of last year", REF, "June of last year", d(2025, 6, 1), d(2025, 7, 1)),
    ("in January this year", REF, "in January this year", d(2026, 1, 1), d(2026, 2, 1)),
    # Years.
    ("where did he live in 2022?", REF, "in 2022", d(2022, 1, 1), d(2023, 1, 1)),
    ("last year", REF, "last year", d(2025, 1, 1), d(2026, 1, 1)),
    ("this year", REF, "this year", d(2026, 1, 1), d(2027, 1, 1)),
    ("two years ago", REF, "two years ago", d(2024, 1, 1), d(2025, 1, 1)),
    ("during 1999", REF, "during 1999", d(1999, 1, 1), d(2000, 1, 1)),
    ("the report of 2021", REF, None, None, None),  # "of", "from" and "by" name people more than periods
    ("last March", REF, "last March", d(2025, 3, 1), d(2025, 4, 1)),  # asked in March: the one before
    ("last April", d(2026, 4, 20), "last April", d(2025, 4, 1), d(2025, 5, 1)),
    ("in 2022.", REF, "in 2022", d(2022, 1, 1), d(2023, 1, 1)),  # the full stop ends the sentence
    # Since, before, after.
    ("since Monday", REF, "since Monday", d(2026, 3, 16), REF),
    ("since March", REF, "since March", d(2026, 3, 1), REF),
    ("since last week", REF, "since last week", d(2026, 3, 9), REF),
    ("since 2024", REF, "since 2024", d(2024, 1, 1), REF),
    ("after June 2023", REF, "after June 2023", d(2023, 7, 1), None),
    ("before 2020", REF, "before 2020", None, d(2020, 1, 1)),
    ("before March 2023", REF, "before March 2023", None, d(2023, 3, 1)),
    ("after yesterday", REF, "after yesterday", d(2026, 3, 18), None),
    # Ranges.
    ("between May and July", REF, "between May and July", d(2025, 5, 1), d(2025, 8, 1)),
    ("between May and July 2023", REF, "between May and July 2023", d(2023, 5, 1), d(2023, 8, 1)),
    ("from March to May", REF, "from March to May", d(2025, 3, 1), d(2025, 6, 1)),
    ("from November to February", REF, "from November to February", d(2025, 11, 1), d(2026, 3, 1)),
    ("between 2021 and 2023", REF, "between 2021 and 2023", d(2021, 1, 1), d(2024, 1, 1)),
    ("from 2023-05-01 to 2023-05-03", REF, "from 2023-05-01 to 2023-05-03", d(2023, 5, 1), d(2023, 5, 4)),
    ("between Monday and Tuesday", REF, "between Monday and Tuesday", d(2026, 3, 16), d(2026, 3, 18)),
    ("from 2 days ago to yesterday", REF, "from 2 days ago to yesterday", d(2026, 3, 16), d(2026, 3, 18)),
    ("between two years ago and last year", REF, "between two years ago and last year", d(2024, 1, 1), d(2026, 1, 1)),
    ("between December and February 2024", REF, "between December and February 2024", d(2023, 12, 1), d(2024, 3, 1)),
    ("from March 2023 to now", REF, "from March 2023 to now", d(2023, 3, 1), REF),
    ("from May to date", REF, "from May to date", d(2025, 5, 1), REF),
    ("since the day before yesterday", REF, "since the day before yesterday", d(2026, 3, 16), REF),
    # Words that only look like time.
    ("May's '23 budget", REF, None, None, None),  # a possessive, then a year alone: no month named
    # "may" and "mar" the verbs before "this year" or "last year": the year alone is read.
    ("storms could mar this year's harvest", REF, "this year", d(2026, 1, 1), d(2027, 1, 1)),
    ("how long may last year's policy apply", REF, "last year", d(2025, 1, 1), d(2026, 1, 1)),
    ("what may this year bring", d(2026, 6, 18, 15), "this year", d(2026, 1, 1), d(2027, 1, 1)),
    ("what did May say about the budget?", REF, None, None, None),
    ("what did we hear from May?", REF, None, None, None),
    ("the report written by May", REF, None, None, None),
    ("the bug in monday.js", REF, None, None, None),
    ("mail from april@example.com", REF, None, None, None),
    ("open yesterday.txt", REF, None, None, None),
    ("see notes/yesterday", REF, None, None, None),
    ("a today-ish estimate", REF, None, None, None),
    ("the last week.md file", REF, None, None, None),
    ("tickets in march-madness", REF, None, None, None),
    ("May asked for the report", REF, None, None, None),
    ("they will march to the town hall", REF, None, None, None),
    ("March on, said the captain", REF, None, None, None),
    ("upgrade to version 2022.1", REF, None, None, None),
    ("release 1.2.3", REF, None, None, None),
    ("order 2022 was late", REF, None, None, None),
    ("order number 2023 shipped", REF, None, None, None),
    ("ticket ORD-2022", REF, None, None, None),
    ("the v2022 firmware", REF, None, None, None),
    ("issue #2023", REF, None, None, None),
    ("the file report_2022.pdf", REF, None, None, None),
    ("in src/2022/main.py", REF, None, None, None),
    ("call 555-2022", REF, None, None, None),
    ("Model X2022 manual", REF, None, None, None),
    ("the 2022 budget", REF, None, None, None),  # a bare year: no time word before it
    ("Monday is a holiday", REF, None, None, None),
    ("the parrot is called Captain", REF, None, None, None),
    ("what is the next step", REF, None, None, None),
    ("in 3000", REF, None, None, None),  # not a year we read
    ("Jan said she would come", REF, None, None, None),
    ("ask Mar about it", REF, None, None, None),
    ("next week", REF, None, None, None),  # the future names nothing said yet
    ("", REF, None, None, None),
]


def test_the_table_is_large_enough():
    assert len(CASES) >= 80
    assert sum(1 for c in CASES if c[2] is None) >= 20


@pytest.mark.parametrize(("text", "reference", "words", "start", "end"), CASES, ids=[c[0] or "empty" for c in CASES])
def test_time_expressions(text, reference, words, start, end):
    got = understand(text, reference)
    if words is None:
        assert got is None, got
        return
    assert got is not None, text
    assert (got.words, got.start, got.end) == (words, start, end)
    assert text[got.span[0] : got.span[1]] == words


def test_the_reference_times_offset_does_not_change_the_window():
    """An instant is an instant: the same reference in another offset reads the same window."""
    elsewhere = REF.astimezone(datetime.timezone(datetime.timedelta(hours=-8)))
    assert understand("last month", elsewhere) == understand("last month", REF)


@pytest.mark.parametrize(
    "reference",
    [datetime.datetime(1, 1, 1, tzinfo=UTC), datetime.datetime(9999, 12, 31, 23, 59, tzinfo=UTC)],
    ids=["year 1", "year 9999"],
)
def test_a_reference_at_the_ends_of_time_never_fails(reference):
    """A period that would run past year 1 or 9999 names nothing; one inside is read (2022 is in the
    future of year 1: nothing)."""
    for text in ("yesterday", "this week", "last month", "this weekend", "two years ago", "last night", "in 2022"):
        got = understand(text, reference)
        assert got is None or (got.start is None or got.start.year >= 1), text
    in_2022 = understand("in 2022", reference)
    assert (in_2022 and in_2022.start) == (d(2022, 1, 1) if reference.year == 9999 else None)


def test_a_long_question_tries_few_expressions():
    """At most MAX_TRIES expressions are resolved: phrases that name nothing ("since this evening"
    asked at 15:00) use the tries up, so a period after them is not read; a question of 32,768
    characters of them is answered with none."""
    assert understand("since this evening " * 4 + "last week", REF).words == "last week"
    assert understand("since this evening " * MAX_TRIES + "last week", REF) is None
    assert understand(("since this evening " * 2000)[:32_768], REF) is None


@pytest.mark.timeout(60)  # a guard against a regular expression that backtracks without end
def test_spans_that_never_say_ago_are_rejected_without_backtracking_through_their_spaces():
    """Questions of number-unit pairs with no "ago" (each once took seconds to minutes: the spaces
    between the parts of a combined span could be split many ways)."""
    for text in (
        "what happened 1 day" + "    1 day" * 12 + "?",
        "1 day" + "  1 day" * 25 + " x",
        ("1 day " * 6000)[:32_768],
        ("1 day, " * 5000)[:32_768],
        ("1 day and " * 4000)[:32_768],
    ):
        assert understand(text, REF) is None, text[:40]


def test_a_period_after_the_reference_names_nothing():
    """Nothing has been said in the future: a year, month or day that starts after the reference time
    is not read (the next expression is tried)."""
    early = datetime.datetime(1899, 6, 1, tzinfo=UTC)
    assert understand("in 1950", early) is None
    assert understand("in 2030", REF) is None
    assert understand("in 2030 or in 2022", REF).words == "in 2022"
    assert understand("since March", d(2026, 3, 1)) is None  # the window would be empty
