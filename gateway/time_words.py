"""Time said in words (issue 23, item 2; docs/time.md): the time expression of a question, resolved
against a reference time into a window ``[start, end)``.

Two steps, each where it belongs:

1. **Which words are time** is ours: a small English grammar finds the expressions a question can
   hold ("yesterday", "last month", "in March", "March 2023", "two weeks ago", "since Monday",
   "between May and July", "in 2022", "this morning", ISO dates) and refuses the words that only
   look like time: a month or weekday name needs a word of time before it ("in", "since", "last",
   ...) or a day or year beside it, so "May said" and "they march" are not read; a year needs a
   preposition or a month; a number joined to other characters (``v2022``, ``ORD-2022``, ``1.2.3``,
   ``#2023``) is an identifier, not a date. A general date finder (``dateparser.search``) reads all of
   those as dates, which is the wrong trade for a question: a window read by mistake hides the answer.
2. **What the words mean** is the library's: each phrase is resolved by ``dateparser`` (1.5, kept
   up, used widely; relative phrases, month and weekday names, day orders, ISO dates), which gives an
   instant and its granularity (day, week, month, year). We turn that into the whole period: a day,
   the ISO week (Monday to Monday), the calendar month or year. Two things it does not read are
   ours: parts of a day ("this morning": 05:00 to 12:00), "last weekend", "the day before
   yesterday", a month's year written "of 2023", "'23" or "last year", and a range "to now".

All times are UTC: the reference time is an instant, and the caller's calendar is not known.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from dateparser.date import DateDataParser

UTC = datetime.UTC
MONTHS = "january february march april may june july august september october november december".split()
MONTH_ABBREVIATIONS = "jan feb mar apr jun jul aug sep sept oct nov dec".split()
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
# Expressions tried at most, each resolved by dateparser (milliseconds apiece), in a question of up
# to 32,768 characters: one whose first five name nothing is not about a period.
MAX_TRIES = 5
# Parts of a day, as hours [from, to) of the reference's day ("last night": the evening before to
# the morning of the reference day).
PARTS_OF_DAY = {"morning": (5, 12), "afternoon": (12, 17), "evening": (17, 24), "tonight": (17, 24)}

# Words after which a month, weekday or year is time ("in May", "since Monday", "of 2022").
# Not "from", "by" or "of": "feedback from June", "written by May" and "the email of April" name people
# more often than months ("from X to Y" is a range of its own).
_CUE = r"(?:in|on|during|since|before|after|until|till|around|last|this|past|early|late|mid)"
# A token boundary that is not part of an identifier: no letter, digit, or joining character
# (- _ . / # : @ +) on either side.
_L = r"(?<![\w\-./#:@+])"
_R = r"(?![\w\-/#:@+]|\.\w)"
_MONTH = r"(?:" + "|".join(MONTHS) + r")"
_MONTH_ABBR = r"(?:" + "|".join(MONTH_ABBREVIATIONS) + r")\.?"
_WEEKDAY = r"(?:" + "|".join(WEEKDAYS) + r")"
_YEAR = r"(?:19\d\d|20\d\d)"
# A year beside a month or day: any four digits from 1000 ("May 5, 2300" is a future day, never
# this year's May 5 with the year left over); a bare year is only 1900..2099.
_FULL_YEAR = r"(?:[12]\d{3})"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_NUMBER = r"(?:\d{1,3}|" + "|".join(NUMBER_WORDS) + r")"
_UNIT = r"(?:day|week|month|year)s?"
# Between the parts of a combined span ("2 weeks, 3 days", "2 weeks and 3 days"): each way of writing
# it matches one way only (no two quantifiers share the same spaces), and at most four parts are
# read, so a question of spans that never says "ago" is rejected in linear time.
_SPAN_JOIN = r"(?:\s*,\s*(?:and\s+)?|\s+and\s+|\s+)"

# A point in time: one phrase dateparser resolves (or one of ours), most specific forms first.
_POINT = (
    r"(?:"
    rf"{_L}{_YEAR}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01]){_R}"  # 2023-05-08
    rf"|{_L}{_YEAR}-(?:0[1-9]|1[0-2]){_R}"  # 2023-05
    rf"|(?:the\s+)?{_DAY}\s+(?:of\s+)?(?:{_MONTH}|{_MONTH_ABBR})(?:,?\s+(?:{_FULL_YEAR}|'\d\d){_R})?"  # 5 May 2023
    rf"|(?:{_MONTH}|{_MONTH_ABBR})\s+{_DAY}(?:,?\s+(?:{_FULL_YEAR}|'\d\d))?{_R}"  # May 5, May 5th, 2023
    rf"|(?:{_MONTH}|{_MONTH_ABBR}),?\s+(?:of\s+)?(?:{_FULL_YEAR}|'\d\d){_R}"  # March 2023, May of 2023, May '23
    rf"|{_MONTH}\s+of\s+(?:last|this)\s+year(?!')"  # June of last year (cued alone: "in March last year")
    r"|(?:the\s+)?day\s+before\s+yesterday"
    r"|yesterday|today|tonight|last\s+night"
    r"|this\s+(?:morning|afternoon|evening)"
    r"|(?:last|this|past|previous)\s+(?:week|month|year|weekend)"
    rf"|{_L}{_NUMBER}\s+{_UNIT}(?:{_SPAN_JOIN}{_NUMBER}\s+{_UNIT}){{0,3}}\s+ago"  # 2 weeks and 3 days ago
    rf"|(?:last|this|past|previous)\s+{_WEEKDAY}"
    r")"
)
# A point that is time only after a cue word: a bare month, weekday or year.
# "March last year" only after a cue word too: "may last year after year" and "mar this year's harvest"
# are verbs.
_CUED_POINT = rf"(?:{_MONTH}\s+(?:last|this)\s+year(?!')|{_MONTH}|{_WEEKDAY}|{_L}{_YEAR}{_R})"
_ANY_POINT = rf"(?:{_POINT}|{_CUED_POINT})"
# The end of a range that runs to the reference time ("from March 2023 to now").
_NOW = r"(?:now|date|the\s+present|present)"
# Every expression is whole: not part of an identifier on either side ("monday.js", "april@example.com",
# "yesterday.txt", "notes/yesterday", "march-madness").
_PATTERN = re.compile(
    rf"{_L}(?:"
    rf"(?P<between>between\s+(?P<b1>{_ANY_POINT})\s+and\s+(?P<b2>{_ANY_POINT}))"
    rf"|(?P<fromto>from\s+(?P<f1>{_ANY_POINT})\s+(?:to|until|till)\s+(?P<f2>{_ANY_POINT}|{_NOW}))"
    rf"|(?P<since>(?:since|after|before)\s+(?P<s1>{_ANY_POINT}))"
    rf"|(?P<cued>{_CUE}\s+(?:(?:early|late|mid)\s+)?(?P<c1>{_ANY_POINT}))"
    rf"|(?P<point>{_POINT})"
    rf"){_R}",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Understood:
    """The time expression read in a question: its words as written, where they are, and the window
    they name (``start`` or ``end`` None: open on that side)."""

    words: str
    span: tuple[int, int]
    start: datetime.datetime | None
    end: datetime.datetime | None


def understand(text: str, reference: datetime.datetime) -> Understood | None:
    """The first time expression of ``text`` resolved against ``reference`` (aware), or None when
    the text holds none (or only one that names no period before the reference's year 9999)."""
    for tries, match in enumerate(_PATTERN.finditer(text)):
        if tries == MAX_TRIES:
            break
        try:
            window = _window(match, reference.astimezone(UTC))
        except (OverflowError, ValueError):  # a period past year 1 or 9999 of the reference's
            window = None
        if window is not None and (window[0] is None or window[0] < reference):  # the future: nothing said yet
            return Understood(match.group(0), match.span(), *window)
    return None


def _window(match: re.Match, ref: datetime.datetime):
    if match.group("between") or match.group("fromto"):
        first, last = (match.group("b1"), match.group("b2")) if match.group("between") else match.group("f1", "f2")
        b = _period(last, ref)
        if b is None:
            return None
        year = re.search(_YEAR + r"\s*$", last)
        if year and not re.search(_YEAR, first):
            # "between May and July 2023": May of 2023; "between December and February 2024": the
            # December before.
            y = int(year.group(0))
            a = _period(f"{first} {y}", ref)
            if a is not None and a[0] >= b[1]:
                a = _period(f"{first} {y - 1}", ref)
        else:
            # The start as the reference reads it ("from 2 days ago to yesterday"), or, when that is
            # not before the end, as the last such period before the end ("from November to
            # February" asked in March: the November before).
            a = _period(first, ref)
            if a is not None and a[0] >= b[1]:
                a = _period(first, b[1] - datetime.timedelta(microseconds=1))
        if a is None or b[1] <= a[0]:
            return None
        return a[0], b[1]
    if match.group("since"):
        word = match.group("since").split()[0].lower()
        period = _period(match.group("s1"), ref)
        if period is None:
            return None
        if word == "since":
            return (period[0], ref) if period[0] < ref else None
        return (period[1], None) if word == "after" else (None, period[0])
    phrase = match.group("c1") or match.group("point")
    period = _period(phrase, ref)
    if period is not None and match.group("cued") and match.group("cued").lower().startswith("last "):
        # "last March" asked in March (or "last Monday" on a Monday): the one before, not this one.
        if period[0] <= ref < period[1]:
            return _period(phrase, period[0] - datetime.timedelta(microseconds=1))
    return period


def _period(phrase: str, ref: datetime.datetime) -> tuple[datetime.datetime, datetime.datetime] | None:
    """The period ``phrase`` names, ``[start, end)`` in UTC, resolved against ``ref``."""
    words = " ".join(phrase.lower().replace(",", " ").split())
    day = datetime.datetime(ref.year, ref.month, ref.day, tzinfo=UTC)
    for part, (lo, hi) in PARTS_OF_DAY.items():
        if words in (f"this {part}", part):
            return day + datetime.timedelta(hours=lo), day + datetime.timedelta(hours=hi)
    if re.fullmatch(_NOW, words):
        return ref, ref
    if words in ("the day before yesterday", "day before yesterday"):
        return day - datetime.timedelta(days=2), day - datetime.timedelta(days=1)
    words = _spelled_year(words, ref)
    if words == "last night":
        return day - datetime.timedelta(hours=6), day + datetime.timedelta(hours=6)
    if words.endswith("weekend"):  # this week's Saturday and Sunday, or the week before's
        saturday = day + datetime.timedelta(days=5 - day.weekday())
        start = saturday if words.startswith("this") else saturday - datetime.timedelta(days=7)
        return start, start + datetime.timedelta(days=2)
    if re.fullmatch(_YEAR, words):
        return _whole(datetime.datetime(int(words), 1, 1, tzinfo=UTC), "year")
    parsed = _parser(ref).get_date_data(_for_dateparser(words))
    if parsed.date_obj is None:
        return None
    when = parsed.date_obj.replace(tzinfo=UTC) if parsed.date_obj.tzinfo is None else parsed.date_obj
    # A combined span ("2 years and 1 month ago") names a day, whatever its largest unit.
    combined = len(re.findall(_UNIT, words)) > 1 and words.endswith(" ago")
    return _whole(when.astimezone(UTC), "day" if combined else parsed.period)


def _spelled_year(words: str, ref: datetime.datetime) -> str:
    """A month's year as dateparser reads it: "may of 2023" and "may '23" as "may 2023" (a two-digit
    year in the reference's century unless that is after the reference's year), "march last year"
    as "march 2025" asked in 2026."""
    words = re.sub(r"\s+of\s+(?=\d{4}$|'\d\d$|last year$|this year$)", " ", words)
    short = re.search(r"'(\d\d)$", words)
    if short:
        year = ref.year // 100 * 100 + int(short.group(1))
        words = f"{words[: short.start()]}{year - 100 if year > ref.year else year}"
    named = re.fullmatch(r"(\S+) (last|this) year", words)
    if named:
        words = f"{named.group(1)} {ref.year - (named.group(2) == 'last')}"
    return words


def _for_dateparser(words: str) -> str:
    """The phrase as dateparser reads it: number words as digits ("two weeks ago": "2 weeks ago"),
    "past"/"previous" as "last"."""
    out = []
    for w in words.split():
        if w in NUMBER_WORDS and w not in ("a", "an"):
            w = str(NUMBER_WORDS[w])
        out.append("last" if w in ("past", "previous") else w)
    return " ".join(out)


def _whole(when: datetime.datetime, period: str) -> tuple[datetime.datetime, datetime.datetime]:
    """The whole ``period`` (day, week, month or year) that holds ``when``."""
    day = datetime.datetime(when.year, when.month, when.day, tzinfo=UTC)
    if period == "week":
        start = day - datetime.timedelta(days=day.weekday())
        return start, start + datetime.timedelta(days=7)
    if period == "month":
        start = day.replace(day=1)
        return start, (start + datetime.timedelta(days=32)).replace(day=1)
    if period == "year":
        start = day.replace(month=1, day=1)
        return start, start.replace(year=start.year + 1)
    return day, day + datetime.timedelta(days=1)


def _parser(ref: datetime.datetime) -> DateDataParser:
    """English, relative to ``ref`` (naive, read as UTC: no time zone conversion, which cost 1.7 ms a
    phrase here), a name without a year the last one before ``ref`` ("May" in March is last May),
    periods kept (``RETURN_TIME_AS_PERIOD``), and only the two parsers phrases need."""
    return DateDataParser(
        languages=["en"],
        try_previous_locales=False,
        settings={
            "RELATIVE_BASE": ref.replace(tzinfo=None),
            "PREFER_DATES_FROM": "past",
            "RETURN_TIME_AS_PERIOD": True,
            "PARSERS": ["relative-time", "absolute-time"],
        },
    )
