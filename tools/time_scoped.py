"""Builds eval/time-scoped/: LoCoMo questions that name a period (issue 23, item 5; docs/time.md).

LoCoMo's conversations (snap-research/LoCoMo, ``data/locomo10.json``, CC BY-NC 4.0: a folder per
conversation in the format of ``demo/``, one memory per dialog turn with its session's date as
``occurred_at``, and the benchmark's questions with their evidence turns as ``relevant_ids``; its
licence keeps it out of this repository, so only the questions this writes are kept) hold sessions
weeks or months apart, each with its date. A question
of LoCoMo whose evidence turns all lie in one session is asked again naming that session's period,
in one of three forms taken in turn:

- ``month``: "<question> in May 2023?", the reference time the day after the conversation's last
  session (a question asked afterwards about a past month);
- ``last-month``: "<question> last month?", the reference time the 15th of the month after the
  session's (so "last month" is the session's month);
- ``day``: "<question> on 8 May 2023?", the reference time as for ``month``.

Kept: single-hop, multi-hop and open-domain questions (temporal ones ask *when*, which naming the
period would answer), none that already names a time (``gateway.time_words``), every second eligible
one, so the set stays a sample. Each row keeps LoCoMo's ``relevant_ids`` and adds
``reference_time``, ``form`` and ``source_id`` (the LoCoMo question it was made from); ``category``
and ``category_name`` are the form, so ``recallatron eval`` reports each form.

    python -m tools.time_scoped --locomo $EVAL/locomo [--out eval/time-scoped]
    recallatron eval --dataset eval/time-scoped --memories-from $EVAL/locomo --time-words

``$EVAL/locomo`` is the folder of those conversations (README.md, "Retrieval quality (measured)").
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from gateway.time_words import understand

FORMS = ("month", "last-month", "day")
KEPT_CATEGORIES = {"single-hop", "multi-hop", "open-domain"}
EVERY = 2  # every second eligible question
# A reference after every period a question could name, so that none is left unread as "the future".
NAMES_ANY_TIME = datetime.datetime(2099, 12, 31, tzinfo=datetime.UTC)


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _instant(text: str) -> datetime.datetime:
    when = datetime.datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)


def _iso(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def scoped(conversation: Path) -> list[dict]:
    """The time-scoped questions of one LoCoMo conversation folder (module docstring)."""
    said = {row["id"]: _instant(row["occurred_at"]) for row in _jsonl(conversation / "memories.jsonl")}
    after_all = max(said.values()) + datetime.timedelta(days=1)
    out, eligible = [], 0
    for q in _jsonl(conversation / "queries.jsonl"):
        if q.get("category_name") not in KEPT_CATEGORIES or not all(i in said for i in q["relevant_ids"]):
            continue
        days = {said[i].date() for i in q["relevant_ids"]}
        if len(days) != 1:
            continue
        if understand(q["question"], NAMES_ANY_TIME) is not None:  # it already names a period
            continue
        eligible += 1
        if eligible % EVERY:
            continue
        form = FORMS[(eligible // EVERY) % len(FORMS)]
        day = days.pop()
        stem = q["question"].rstrip().rstrip("?").rstrip()
        reference = after_all
        if form == "month":
            text = f"{stem} in {day:%B %Y}?"
        elif form == "day":
            text = f"{stem} on {day.day} {day:%B %Y}?"
        else:
            text = f"{stem} last month?"
            next_month = (day.replace(day=1) + datetime.timedelta(days=32)).replace(day=15)
            reference = datetime.datetime(next_month.year, next_month.month, 15, 12, tzinfo=datetime.UTC)
        read = understand(text, reference)
        assert read is not None, text  # the form must be read as time
        out.append(
            {
                "id": f"{q['id']}/{form}",
                "question": text,
                "relevant_ids": q["relevant_ids"],
                "category": form,
                "category_name": form,
                "reference_time": _iso(reference),
                "form": form,
                "source_id": q["id"],
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--locomo",
        required=True,
        help="the folder of LoCoMo's conversations in the format of demo/, one sub-folder each (module docstring)",
    )
    ap.add_argument("--out", default="eval/time-scoped", help="where the question folders are written")
    args = ap.parse_args(argv)
    total = 0
    for conversation in sorted(p for p in Path(args.locomo).iterdir() if (p / "queries.jsonl").is_file()):
        rows = scoped(conversation)
        folder = Path(args.out) / conversation.name
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "queries.jsonl").open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        total += len(rows)
        print(f"{conversation.name}: {len(rows)} questions")
    print(f"{total} questions in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
