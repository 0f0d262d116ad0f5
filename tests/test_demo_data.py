"""`make demo` runs from a clone alone: the Makefile's DATA names a folder inside the repository,
that folder is a well-formed corpus (every question's relevant ids are memories of it), and it
states its source and licence."""

import datetime
import json
import re
from pathlib import Path

import pytest

from cli.evaluate import read_jsonl

ROOT = Path(__file__).resolve().parent.parent


def makefile_data() -> str:
    """The default of the Makefile's DATA variable (``DATA ?= ...``)."""
    (value,) = re.findall(r"^DATA \?= *(\S+) *$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    return value


def inside_repository(path: str) -> Path:
    """``path`` (relative to the repository root) resolved; AssertionError when it leaves the repository."""
    resolved = (ROOT / path).resolve()
    assert resolved.is_relative_to(ROOT), f"{path} is outside the repository"
    return resolved


def test_makefile_demo_data_is_inside_the_repository():
    folder = inside_repository(makefile_data())
    assert (folder / "memories.jsonl").is_file() and (folder / "queries.jsonl").is_file()


@pytest.mark.parametrize("path", ["../elsewhere/eval/conv-26", "/etc", "demo/../../elsewhere"])
def test_paths_leaving_the_repository_are_refused(path):
    with pytest.raises(AssertionError, match="outside the repository"):
        inside_repository(path)


def test_demo_defaults_to_the_same_folder():
    source = (ROOT / "cli" / "demo.py").read_text()
    assert 'default=str(ROOT / "demo")' in source and makefile_data() == "demo"


def test_demo_corpus_is_well_formed():
    folder = inside_repository(makefile_data())
    memories = read_jsonl(folder / "memories.jsonl")
    queries = read_jsonl(folder / "queries.jsonl")
    ids = [row["id"] for row in memories]
    assert len(ids) == len(set(ids)) == 60
    for row in memories:
        assert set(row) == {"id", "title", "body", "occurred_at", "metadata"}
        assert row["body"].startswith(row["metadata"]["speaker"] + ": ")
        datetime.datetime.fromisoformat(row["occurred_at"])
    assert len(queries) == 31 and len({q["id"] for q in queries}) == 31
    for q in queries:
        assert q["relevant_ids"] and set(q["relevant_ids"]) <= set(ids), q["id"]
        assert (q["category"], q["category_name"]) in {
            (1, "multi-hop"),
            (2, "temporal"),
            (3, "open-domain"),
            (4, "single-hop"),
        }


def test_demo_states_its_source_and_licence():
    readme = (inside_repository(makefile_data()) / "README.md").read_text()
    assert "**Source and licence.**" in readme and "no third-party text" in readme
    assert "../" not in readme and "/work/" not in readme  # it points at nothing outside the repository


def test_read_jsonl_names_a_broken_line(tmp_path):
    """Bad input: a corpus line that is not JSON is named, not a crash."""
    bad = tmp_path / "memories.jsonl"
    bad.write_text(json.dumps({"id": "D1:1"}) + "\n{not json\n")
    with pytest.raises(SystemExit, match=r"memories.jsonl:2: not JSON"):
        read_jsonl(bad)
