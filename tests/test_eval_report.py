"""The eval report's text when questions were refused: the refused line and side-by-side tables
whose variants answered different categories."""

from cli.evaluate import _side_by_side, print_report, refused_text


def scores(mrr: float, queries: int) -> dict:
    return {"recall@5": 1.0, "recall@10": 1.0, "recall@50": 1.0, "ndcg@10": 1.0, "mrr": mrr, "queries": queries}


def report(refused: dict, categories: dict) -> dict:
    answered = sum(c["queries"] for c in categories.values())
    return {
        "overall": scores(0.75, answered),
        "per_corpus": {"c1": scores(0.75, answered)},
        "per_category": categories,
        "dense_unavailable_queries": 0,
        "reranked_queries": 0,
        "refused": refused,
    }


def test_refused_line_counts_by_code_and_names_the_answered():
    r = report({"DEADLINE_EXCEEDED": 1, "INVALID_ARGUMENT": 2}, {"1": scores(0.5, 3), "2": scores(1.0, 2)})
    assert refused_text(r) == (
        "refused: 3 of 8 questions (DEADLINE_EXCEEDED 1, INVALID_ARGUMENT 2); the metrics are over the 5 answered"
    )
    assert refused_text(report({}, {"1": scores(0.5, 3)})) == ""


def test_print_report_shows_the_refused_line_only_when_some_were_refused(capsys):
    print_report(report({"UNAVAILABLE": 4}, {"1": scores(0.5, 1)}), "hybrid")
    assert capsys.readouterr().out.splitlines()[-1] == (
        "refused: 4 of 5 questions (UNAVAILABLE 4); the metrics are over the 1 answered"
    )
    print_report(report({}, {"1": scores(0.5, 1)}), "hybrid")
    assert "refused" not in capsys.readouterr().out


def test_side_by_side_marks_a_category_a_variant_never_answered():
    full = report({}, {"1": scores(0.5, 2), "2": scores(1.0, 1)})
    partial = report({"UNAVAILABLE": 1}, {"1": scores(0.25, 2)})  # category 2's only question was refused
    lines = _side_by_side({"lexical": full, "dense": partial}, "mrr").splitlines()
    assert lines[0].split() == ["mrr", "lexical", "dense"]
    assert lines[2].split() == ["overall", "0.750", "0.750"]
    assert lines[3].split() == ["cat", "1", "0.500", "0.250"]
    assert lines[4].split() == ["cat", "2", "1.000", "-"]
