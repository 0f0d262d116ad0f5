"""Per-turn recall measured (cli/inject_eval.py): the metrics on hand-built turns with known answers,
the openers file, the gate rule's all-terms margin, and `calibrate-inject` and `eval --inject` end to
end on demo/ against the real stack, bad arguments included."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from conftest import ROOT

from cli.dataset import read_jsonl
from cli.evaluate import eval_parser
from cli.inject_eval import (
    QUIET_SHARE,
    Turn,
    calibrate_inject_parser,
    choose,
    evidence,
    off_topic_prompts,
    off_topic_summary,
    parse_grid,
    percentile,
    question_summary,
)
from servicekit import settings
from servicekit.relevance_gate import ALL_TERMS_MARGIN, PRESETS, Signals, passes

OPENERS = ROOT / "eval" / "openers"
DEMO = ROOT / "demo"


def test_evidence_any_and_all():
    both = frozenset({"a", "b"})
    assert evidence(Turn(("a", "b", "c"), 90, both)) == (True, True)
    assert evidence(Turn(("b", "x"), 40, both)) == (True, False)
    assert evidence(Turn(("x",), 40, both)) == (False, False)
    assert evidence(Turn((), 0, both)) == (False, False)
    assert evidence(Turn(("a",), 10)) == (False, False)  # no relevant ids: nothing to find


def test_percentile_is_nearest_rank():
    assert percentile([]) == 0.0
    assert percentile([7]) == 7.0
    values = list(range(1, 21))  # 1..20: the 95th percentile is the 19th value
    assert percentile(values) == 19.0
    assert percentile(list(reversed(values))) == 19.0
    assert percentile(list(range(1, 101))) == 95.0
    assert percentile([0, 0, 0, 500]) == 500.0  # ceil(0.95 * 4) = 4th value
    assert percentile([3, 1, 2], 0.5) == 2.0


def test_question_summary_known_answers():
    turns = [
        Turn(("a", "b"), 100, frozenset({"a", "b"})),  # any and all
        Turn(("a",), 300, frozenset({"a", "c"})),  # any only
        Turn((), 0, frozenset({"d"})),  # nothing added
        Turn(("x",), 200, frozenset({"d"})),  # added, but not the relevant one
    ]
    s = question_summary(turns)
    assert s == {"questions": 4, "any": 0.5, "all": 0.25, "mean_tokens": 150.0, "p95_tokens": 300.0}
    assert question_summary([]) == {"questions": 0, "any": 0.0, "all": 0.0, "mean_tokens": 0.0, "p95_tokens": 0.0}


def test_off_topic_summary_known_answers():
    turns = [Turn((), 0), Turn((), 0), Turn(("m1",), 120), Turn((), 0), Turn(("m1", "m2"), 280)]
    assert off_topic_summary(turns) == {"prompts": 5, "added_nothing": 0.6, "mean_tokens": 80.0}
    assert off_topic_summary([]) == {"prompts": 0, "added_nothing": 0.0, "mean_tokens": 0.0}


def row(gate, fit_any, fit_quiet):
    half = {
        "questions": {"questions": 10, "any": fit_any, "all": 0.0, "mean_tokens": 0.0, "p95_tokens": 0.0},
        "off_topic": {"prompts": 10, "added_nothing": fit_quiet, "mean_tokens": 0.0},
    }
    return {"min_cosine": gate, "fit": half, "held_out": half, "refused": {}}


def test_presets_chosen_by_the_quiet_share():
    rows = [row(0.3, 0.80, 0.70), row(0.4, 0.75, 0.85), row(0.5, 0.70, 0.92), row(0.6, 0.70, 0.98), row(0.7, 0.5, 1)]
    chosen = choose(rows)
    assert chosen["loose"]["min_cosine"] == 0.4  # best any with >= 0.80 quiet
    assert chosen["default"]["min_cosine"] == 0.6  # 0.5 and 0.6 tie on any: the higher gate
    assert chosen["strict"]["min_cosine"] == 0.6
    assert choose([row(0.3, 0.9, 0.5)]) == dict.fromkeys(QUIET_SHARE)  # nothing meets any rule
    # The budget bounds the block: equal evidence from 0.2 to 0.4; loose takes the lowest, default the highest.
    flat = choose([row(0.2, 0.45, 0.83), row(0.3, 0.45, 0.83), row(0.4, 0.45, 0.92), row(0.5, 0.40, 0.98)])
    assert {name: r["min_cosine"] for name, r in flat.items()} == {"loose": 0.2, "default": 0.4, "strict": 0.5}


def test_grid_parsing():
    assert parse_grid("0.5,0.3, 0.4,0.3") == [0.3, 0.4, 0.5]
    for bad, message in [
        ("0.3,abc", "'abc' is not a number"),
        ("1.5", "1.5 is outside 0..1"),
        ("-0.1", "-0.1 is outside 0..1"),
        ("", "'' is not a number"),
        ("0.3,,0.4", "'' is not a number"),
    ]:
        with pytest.raises(SystemExit, match=message):
            parse_grid(bad)


def test_the_openers_file_parses():
    rows = read_jsonl(OPENERS / "queries.jsonl")
    assert 100 <= len(rows) <= 150
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({r["question"].lower() for r in rows}) == len(rows)
    for r in rows:
        assert set(r) == {"id", "question", "relevant_ids", "category"}
        assert r["relevant_ids"] == [] and r["category"] == "opener"
        assert r["question"].strip() == r["question"] and 0 < len(r["question"]) <= 200
    prompts = off_topic_prompts(None, OPENERS)
    assert len(prompts) == len(rows) and {p["source"] for p in prompts} == {"openers"}
    assert prompts[0] == {"id": rows[0]["id"], "question": rows[0]["question"], "source": "openers"}


def test_off_topic_prompts_refuse_bad_folders(tmp_path):
    with pytest.raises(SystemExit, match="no such folder"):
        off_topic_prompts(None, tmp_path / "nope")
    with pytest.raises(SystemExit, match="no such file"):
        off_topic_prompts(None, tmp_path)  # a folder without queries.jsonl
    (tmp_path / "queries.jsonl").write_text("\n\n")
    with pytest.raises(SystemExit, match="no prompts"):
        off_topic_prompts(None, tmp_path)
    (tmp_path / "queries.jsonl").write_text('{"id": "o1", "question": "hi"}\n{"id": "o2", "question": "  "}\n')
    with pytest.raises(SystemExit, match="prompt 2 has no question text"):
        off_topic_prompts(None, tmp_path)
    (tmp_path / "queries.jsonl").write_text('["not", "an object"]\n')
    with pytest.raises(SystemExit, match="prompt 1 has no question text"):
        off_topic_prompts(None, tmp_path)
    with pytest.raises(SystemExit, match="no memories.jsonl"):
        off_topic_prompts(tmp_path / "nope", None)


def test_all_terms_passes_only_near_the_gate():
    """Every scored term of a short opener ("good evening") is in many turns of small talk: all terms
    count only for a memory within ALL_TERMS_MARGIN of the gate's cosine (or with the meaning arm down)."""
    gate = PRESETS["default"]
    near = Signals(
        lexical_rank=1, cosine=gate - ALL_TERMS_MARGIN, identifier_matches=0, all_terms=True, dense_available=True
    )
    far = Signals(
        lexical_rank=1,
        cosine=gate - ALL_TERMS_MARGIN - 0.01,
        identifier_matches=0,
        all_terms=True,
        dense_available=True,
    )
    unseen = Signals(
        lexical_rank=2, cosine=0.0, identifier_matches=0, all_terms=True, dense_available=True
    )  # not a dense neighbour
    assert passes(near, gate) and not passes(far, gate) and not passes(unseen, gate)
    down = Signals(lexical_rank=2, cosine=0.0, identifier_matches=0, all_terms=True, dense_available=False)
    assert passes(down, gate)
    assert not passes(Signals(0, 0.0, 0, True, dense_available=False), gate)  # all terms needs the keyword arm
    assert passes(Signals(0, 0.0, 1, False, True), gate)  # an identifier typed in the turn
    assert passes(Signals(0, gate, 0, False, True), gate) and not passes(Signals(3, gate - 0.001, 0, False, True), gate)


@pytest.fixture(scope="module")
def off_corpus(tmp_path_factory) -> Path:
    """A small off-topic dataset: claims about cell biology, none about demo/'s conversation."""
    root = tmp_path_factory.mktemp("off") / "claims"
    root.mkdir()
    (root / "memories.jsonl").write_text(json.dumps({"id": "x", "title": "", "body": "unused"}) + "\n")
    claims = [
        "Protein folding kinetics differ in E. coli at low temperature.",
        "Mitochondrial DNA mutation rates rise with age in mice.",
        "Ribosome stalling triggers quality control in yeast.",
        "Telomerase activity is elevated in most human cancers.",
    ]
    (root / "queries.jsonl").write_text(
        "".join(
            json.dumps({"id": f"claims/{i}", "question": c, "relevant_ids": []}) + "\n" for i, c in enumerate(claims)
        )
    )
    return root


def run(stack, capsys, *argv) -> tuple[int, str]:
    """``recallatron ARGV`` in this process against the test stack's gateway, through the commands' own
    parsers (nothing imports cli.main); (exit status, stdout)."""
    parser = argparse.ArgumentParser(prog="recallatron")
    sub = parser.add_subparsers(dest="command", required=True)
    eval_parser(sub)
    calibrate_inject_parser(sub)
    args = parser.parse_args([*argv, "--gateway", client_addr(stack), "--operator-token", stack.operator_token])
    code = args.handler(args, settings.load())
    return code, capsys.readouterr().out


def client_addr(stack) -> str:
    return f"127.0.0.1:{stack.gateway.port}"


def corpora(off_corpus) -> list[str]:
    """The demo's questions with the off-topic corpus and the openers: the command line of both reports."""
    return ["--dataset", str(DEMO), "--off-topic", str(off_corpus), "--openers", str(OPENERS)]


@pytest.mark.slow
def test_eval_inject_on_demo(stack, capsys, off_corpus):
    code, out = run(
        stack,
        capsys,
        "eval",
        "--inject",
        *corpora(off_corpus),
        "--json",
    )
    assert code == 0
    rep = json.loads(out)
    q = rep["questions"]
    assert q["questions"] == 31 and list(q["per_corpus"]) == ["demo"]
    assert 0.5 <= q["all"] <= q["any"] <= 1.0
    assert 0 < q["mean_tokens"] <= q["p95_tokens"] <= 600
    assert rep["min_cosine"] == [PRESETS["default"]]
    assert rep["off_topic"]["openers"]["prompts"] == 139 and rep["off_topic"]["claims"]["prompts"] == 4
    assert rep["off_topic"]["all"]["prompts"] == 143
    assert rep["off_topic"]["claims"]["added_nothing"] == 1.0
    assert rep["off_topic"]["openers"]["added_nothing"] >= 0.9
    assert rep["refused"] == {}
    code, text = run(stack, capsys, "eval", "--inject", "--dataset", str(DEMO))
    assert code == 0
    # Another workspace of the same rows: the figures may move by a question, the report's shape not.
    assert re.search(
        r"^questions: 31; relevant memory in the block: any 0\.\d{3}, all 0\.\d{3}; tokens added: mean \d+, "
        r"p95 \d+$",
        text,
        re.M,
    ), text
    assert "off-topic" not in text  # none asked


@pytest.mark.slow
def test_calibrate_inject_on_demo(stack, capsys, off_corpus, tmp_path):
    out_file = tmp_path / "curve.json"
    code, out = run(
        stack,
        capsys,
        "calibrate-inject",
        *corpora(off_corpus),
        "--grid",
        "0.9,0.3",
        "--out",
        str(out_file),
        "--json",
    )
    assert code == 0
    result = json.loads(out)
    assert json.loads(out_file.read_text()) == result
    assert result["counts"] == {
        "corpora": 1,
        "questions": 31,
        "off_topic_prompts": 143,
        "off_topic_sources": {"claims": 4, "openers": 139},
    }
    low, high = result["curve"]
    assert (low["min_cosine"], high["min_cosine"]) == (0.3, 0.9)
    for r in (low, high):
        assert r["fit"]["questions"]["questions"] + r["held_out"]["questions"]["questions"] == 31
        assert r["fit"]["off_topic"]["prompts"] + r["held_out"]["off_topic"]["prompts"] == 143
    # A higher gate finds less and adds less: fewer questions with their memory, more quiet prompts.
    for half in ("fit", "held_out"):
        assert low[half]["questions"]["any"] > high[half]["questions"]["any"]
        assert low[half]["off_topic"]["added_nothing"] <= high[half]["off_topic"]["added_nothing"]
        assert high[half]["off_topic"]["added_nothing"] == 1.0
    assert set(result["chosen"]) == {"strict", "default", "loose"}
    assert result["chosen"]["strict"] in (0.3, 0.9)


def test_bad_arguments_give_clear_errors(stack, capsys, off_corpus, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "queries.jsonl").write_text("")
    cases = [
        (["eval", "--inject", "--dataset", str(tmp_path / "nope")], "--dataset .*nope: no such folder"),
        (["eval", "--inject", "--dataset", str(tmp_path)], "no memories.jsonl"),
        (
            ["eval", "--inject", "--dataset", str(DEMO), "--openers", str(tmp_path / "gone")],
            "--openers .*gone: no such",
        ),
        (["eval", "--inject", "--dataset", str(DEMO), "--openers", str(empty)], "queries.jsonl: no prompts"),
        (["eval", "--inject", "--dataset", str(DEMO), "--openers", str(DEMO / "memories.jsonl")], "not a folder"),
        (["eval", "--inject", "--dataset", str(DEMO), "--off-topic", str(empty)], "no memories.jsonl"),
        (
            ["eval", "--dataset", str(DEMO), "--openers", str(OPENERS)],
            "--off-topic, --openers and --budget are for --inject",
        ),
        (["eval", "--inject", "--ablate", "--dataset", str(DEMO)], "--inject goes with none of --ablate"),
        (["eval", "--inject", "--dataset", str(DEMO), "--budget", "99"], "--budget must be 100..2500"),
        (["eval", "--inject", "--dataset", str(DEMO), "--budget", "2501"], "--budget must be 100..2500"),
        (["calibrate-inject", "--dataset", str(DEMO)], "give off-topic prompts"),
        (
            ["calibrate-inject", "--dataset", str(DEMO), "--openers", str(OPENERS), "--grid", "0.4,high"],
            "'high' is not",
        ),
        (["calibrate-inject", "--dataset", str(DEMO), "--openers", str(OPENERS), "--grid", "2"], "outside 0..1"),
        (["calibrate-inject", "--dataset", str(DEMO), "--openers", str(empty)], "no prompts"),
        (["calibrate-inject", "--dataset", str(tmp_path / "x"), "--openers", str(OPENERS)], "no such folder"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit, match=message):
            run(stack, capsys, *argv)
