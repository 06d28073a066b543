"""The pre-tokeniser splits exactly like Python's `regex.findall`, stays linear on pathological
input, splits special tokens out first and is lossless on arbitrary bytes."""
from __future__ import annotations

import re
import string
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polytok import _core
from polytok.errors import ConfigError, PatternError
from polytok.pretokenize import PRESETS, PreTokenizer, resolve_pattern

DATA = Path(__file__).parent / "data"
DATA_FILES = sorted(DATA.glob("*.txt"))
PRESET_NAMES = list(PRESETS)
COMPILED = {name: regex.compile(pattern) for name, pattern in PRESETS.items()}

# Characters where the presets' alternatives meet: apostrophes and the contraction letters in
# every case (with the long s that (?i) folds to s), every kind of whitespace and line break,
# marks, title-case and modifier letters, digits of other scripts, the o200k slash.
TRICKY = (
    "'sSdDmMtTlLvVeErRſ"
    " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
    "\u0301\u0300\u20dd\u0903ǅᾈʰˆ々中あÉéßΣσ"
    "0123٣४௫Ⅻ½²"
    "!./,-_\"()'’\u200d\ufeff\x00😀"
)
tricky_text = st.text(alphabet=st.sampled_from(TRICKY), max_size=40)
# Fragments that are whole pieces or break them: contractions, runs, CRLF, a letter after spaces.
fragments = st.lists(
    st.sampled_from(
        ["'s", "'S", "'ſ", "'ll", "'LL", "'lL", "'ve", "'Re", "'d", "'M", "'t", "'x", "don't",
         "HELLO", "Hello", "hELLO", "ǅungla", "ʰA", "A\u0301b", "  ", "   x", "\r\n", "\n\n ",
         " \n", "1234567", " 12", "a/b", "!/\n/", " !!", "...\n", "\u00a0x", "\u3000\n", "\t"]
    ),
    max_size=12,
).map("".join)
any_unicode = st.text(max_size=60)  # full alphabet without surrogates, control chars included
preset_text = st.one_of(any_unicode, tricky_text, fragments)


def findall_bytes(pattern: str | regex.Pattern, text: str) -> list[bytes]:
    """The reference split: `regex.findall` as UTF-8 (whole matches if the pattern has groups;
    empty matches, which no preset can produce, dropped)."""
    compiled = regex.compile(pattern) if isinstance(pattern, str) else pattern
    if compiled.groups == 0:
        return [piece.encode() for piece in compiled.findall(text) if piece]
    return [match.group(0).encode() for match in compiled.finditer(text) if match.group(0)]


@pytest.fixture(scope="module")
def pretokenizers() -> dict[str, PreTokenizer]:
    return {name: PreTokenizer(name) for name in PRESET_NAMES}


def test_rust_and_python_presets_are_the_same_patterns() -> None:
    assert dict(_core.preset_patterns()) == PRESETS
    for name, pattern in PRESETS.items():
        assert PreTokenizer(name).preset == name
        assert PreTokenizer(pattern).preset == name  # recognised by its text, e.g. from a file
        assert resolve_pattern(name) == pattern
    assert PreTokenizer(r"\p{L}+|\P{L}").preset is None


def test_character_tables_equal_regex_on_every_code_point() -> None:
    # The tables are generated from `regex`; this fails if the installed `regex` has other
    # Unicode data (rerun tools/gen_unicode_tables.py then).
    flags = np.frombuffer(_core.preset_character_classes(), dtype=np.uint8)
    code_points = np.array([c for c in range(0x110000) if not 0xD800 <= c < 0xE000])
    every_character = "".join(map(chr, code_points))
    classes = {
        1: r"\p{L}",
        2: r"\p{N}",
        4: r"\s",
        8: r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]",
        16: r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]",
    }
    for bit, pattern in classes.items():
        expected = {ord(match) for match in regex.findall(pattern, every_character)}
        actual = set(np.flatnonzero(flags & bit).tolist())
        assert actual == expected, (pattern, sorted(actual ^ expected)[:10])


@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=preset_text)
def test_preset_equals_regex_findall(pretokenizers: dict, name: str, text: str) -> None:
    assert pretokenizers[name].split(text) == findall_bytes(COMPILED[name], text)


# Mostly ASCII, as most real text is: the presets' ASCII fast path cuts these, and gives way to
# the full matcher wherever a run meets a non-ASCII character (which may be a letter, a mark, a
# number or whitespace). Runs longer than 8 bytes reach the word-at-a-time letter scan; words of
# upper then lower case ("HTTPServer", "Hello") the o200k scan of both runs in one 8-byte load.
ascii_heavy = st.lists(
    st.one_of(
        st.text(alphabet=string.ascii_letters, min_size=1, max_size=20),
        st.builds(str.__add__, st.text(alphabet=string.ascii_uppercase, max_size=7),
                  st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=8)),
        st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=12),
        st.text(alphabet=string.digits, min_size=1, max_size=7),
        st.text(alphabet=" \t\n\r\x0b\x0c", min_size=1, max_size=5),
        st.text(alphabet=string.punctuation, min_size=1, max_size=4),
        st.sampled_from(["'s", "'T", "'ll", "'VE", "'re", "'d", "'M", "'ſ", " ", "  ", "\r\n", "/\n"]),
        st.text(alphabet=st.sampled_from(TRICKY), min_size=1, max_size=2),
    ),
    max_size=16,
).map("".join)


@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=ascii_heavy)
def test_preset_equals_regex_findall_on_mostly_ascii_text(pretokenizers: dict, name: str, text: str) -> None:
    assert pretokenizers[name].split(text) == findall_bytes(COMPILED[name], text)


# Plain text: ASCII and Latin-1 letters, digits, punctuation, runs of spaces and tabs, and line
# breaks, which cl100k and o200k cut 64 bytes at a time from bit masks, in stretches of over 64
# bytes; the rarer parts (a blank before a line break, blanks after one that run on into
# whitespace, an apostrophe before a letter that may start a contraction, ×, ÷, other non-ASCII
# letters, marks and spaces) end a stretch anywhere in the block. Punctuation before a word (alone, after a space or a tab, in runs), case
# changes, digit runs across the groups of three, blank runs before words, digits and
# punctuation, and apostrophes before other letters are where the mask rules meet.
plain_text = st.lists(
    st.one_of(
        st.text(alphabet=string.ascii_letters, min_size=1, max_size=12),
        st.builds(str.__add__, st.text(alphabet=string.ascii_uppercase, max_size=4),
                  st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=6)),
        st.text(alphabet=string.digits, min_size=1, max_size=8),
        st.text(alphabet=string.punctuation.replace("'", ""), min_size=1, max_size=3),
        st.sampled_from([" ", " ", " ", " a", " (", "(", " 1", ". ", "/", "\x7f"]),
        st.sampled_from(["\n", "  ", "'s", "'", "\t", "é", "\u0301", "\xa0", "\r\n", "中", ".\n\n"]),
        st.sampled_from(["\t\t", " \t", "\t ", "   ", "\n\t\t\t", "\n\n\t\t\t\t", "\n  ", "\t1", "\t(", " \xa0",
                         "\t\n", "\n\t\xa0", "\n \t"]),
        st.sampled_from(["l'", "qu'", "'x", "'é", "''", " '", "'1", "'(", "'S", "'re", "'ll", "'l", "'V"]),
        st.text(alphabet=" \t", min_size=1, max_size=6),
        st.text(alphabet="ÀÉÖ×ÞßàéöøÿüÜ÷ªµ", min_size=1, max_size=3),
    ),
    min_size=20,
    max_size=90,
).map("".join)


@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=plain_text)
def test_preset_equals_regex_findall_on_long_plain_text(pretokenizers: dict, name: str, text: str) -> None:
    assert pretokenizers[name].split(text) == findall_bytes(COMPILED[name], text)


@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=500, deadline=None)
@given(parts=st.lists(st.one_of(ascii_heavy, tricky_text, fragments).map(str.encode) | st.binary(max_size=3), max_size=8))
def test_preset_equals_fancy_regex_on_arbitrary_bytes(name: str, parts: list[bytes]) -> None:
    # fancy-regex (as tiktoken runs the pattern) on the same valid runs, invalid runs whole. Its
    # Unicode tables are older than `regex`'s, so the text avoids characters added lately.
    data = b"".join(parts)
    generic = _core.PreTokenizer(PRESETS[name], [], True)
    assert _core.PreTokenizer(PRESETS[name], [], False).split(data) == generic.split(data)


@pytest.mark.parametrize("name", PRESET_NAMES)
@pytest.mark.parametrize("path", DATA_FILES, ids=lambda path: path.name)
def test_preset_equals_regex_findall_on_data_files(pretokenizers: dict, name: str, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    # Upper-cased and CRLF variants exercise o200k's case classes and the line-break rules.
    for variant in (text, text.upper(), text.replace("\n", "\r\n")):
        assert pretokenizers[name].split(variant) == findall_bytes(COMPILED[name], variant)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("cl100k", "he's HE'S It'ſ", [b"he", b"'s", b" HE", b"'S", b" It", "'ſ".encode()]),
        ("gpt2", "HE'S it's", [b"HE", b"'", b"S", b" it", b"'s"]),
        ("cl100k", "x  \n  y  ", [b"x", b"  \n", b" ", b" y", b"  "]),
        ("nanochat", "x  \n  ", [b"x", b"  \n", b"  "]),
        ("cl100k", "12345 1", [b"123", b"45", b" ", b"1"]),
        ("nanochat", "12345", [b"12", b"34", b"5"]),
        ("o200k", "HTTPServer's a/b\n//", [b"HTTPServer's", b" a", b"/b", b"\n", b"//"]),
        ("o200k", "x!/\n/y", [b"x", b"!/\n/", b"y"]),
    ],
)
def test_known_splits(name: str, text: str, expected: list[bytes]) -> None:
    assert findall_bytes(PRESETS[name], text) == expected  # the reference agrees with the table
    assert PreTokenizer(name).split(text) == expected


# Pathological inputs of 10 MB: each must be split in linear time into the pieces listed
# (a quadratic matcher would not finish). `unit` repeats to ~10 MB, then `tail` follows.
TEN_MB = 10_000_000
PATHOLOGICAL = {
    "spaces": (" ", ""),
    "letter": ("a", ""),
    "upper letters": ("A", ""),
    "non-ASCII letter": ("é", ""),
    "CJK": ("中", ""),
    "combining marks": ("\u0301", ""),
    "newlines": ("\n", ""),
    "apostrophes": ("'", ""),
    "mixed whitespace": (" \t\u3000\u00a0", "x"),
    "whitespace with line breaks": (" \r\n\t", "x"),
    "spaces before a letter": (" ", "x"),
}


def expected_lengths(name: str, case: str, size: int) -> list[int]:
    """The piece lengths `regex.findall` gives on the pathological input (by the rules above)."""
    # \s+(?!\S) gives back the last whitespace character, which then prefixes the letter
    # (in gpt2 only an ASCII space can prefix a word).
    if case == "mixed whitespace":
        return [size - 2, 2, 1] if name == "gpt2" else [size - 2, 3]
    if case == "whitespace with line breaks":
        return [size - 1, 1, 1] if name == "gpt2" else [size - 1, 2]
    if case == "spaces before a letter":
        return [size - 1, 2]
    return [size]


@pytest.mark.parametrize("name", PRESET_NAMES)
@pytest.mark.parametrize("case", list(PATHOLOGICAL))
def test_pathological_input_is_split_in_linear_time(pretokenizers: dict, name: str, case: str) -> None:
    unit, tail = PATHOLOGICAL[case]
    unit_bytes = unit.encode()
    data = unit_bytes * (TEN_MB // len(unit_bytes)) + tail.encode()
    lengths = pretokenizers[name].piece_lengths(data).tolist()
    size = len(data) - len(tail.encode())
    assert lengths == expected_lengths(name, case, size)
    # The same rule on a small copy, checked against regex itself.
    small = unit * 7 + tail
    assert pretokenizers[name].split(small) == findall_bytes(COMPILED[name], small)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_long_digit_runs_are_cut_by_the_digit_limit(pretokenizers: dict, name: str) -> None:
    limit = {"gpt2": TEN_MB, "cl100k": 3, "o200k": 3, "nanochat": 2}[name]
    lengths = pretokenizers[name].piece_lengths(b"7" * TEN_MB)
    assert lengths.sum() == TEN_MB
    assert (lengths[:-1] == limit).all() and 0 < lengths[-1] <= limit


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_long_invalid_utf8_is_split_in_linear_time(pretokenizers: dict, name: str) -> None:
    assert pretokenizers[name].piece_lengths(b"\xff" * TEN_MB).tolist() == [TEN_MB]
    # A truncated euro sign before each letter: invalid and valid runs alternate.
    lengths = pretokenizers[name].piece_lengths(b"\xe2\x82a" * (TEN_MB // 3))
    assert lengths.tolist() == [2, 1] * (TEN_MB // 3)


# User regexes with lookahead, lookbehind, possessive quantifiers and atomic groups. Their text
# avoids code points that Unicode 14 (Python's unicodedata) leaves unassigned: fancy-regex's
# Unicode tables are older than `regex`'s, so newer letters differ (the presets do not use it).
USER_REGEXES = [
    r"\p{L}+(?=\s)|\p{L}+|\p{N}|\s+|.",
    r"[a-z]++|\p{N}++| ?[^\s\p{L}\p{N}]++|\s+(?!\S)|\s",
    r"(?>\p{Lu}\p{Ll}*)|\p{Ll}+|\S|\s+",
    r"(?<=\s)\p{L}+|\p{L}+|\P{L}",
    r"\p{Greek}+|\p{Han}|[^\p{Greek}\p{Han}]+",
]
old_unicode_text = st.one_of(
    st.text(st.characters(max_codepoint=0x2FFF, exclude_categories=("Cs", "Cn")), max_size=40),
    tricky_text,
    fragments,
)


@pytest.mark.parametrize("pattern", USER_REGEXES)
@settings(max_examples=150, deadline=None)
@given(text=old_unicode_text)
def test_user_regex_equals_regex_findall(pattern: str, text: str) -> None:
    pretokenizer = PreTokenizer(pattern)
    assert pretokenizer.preset is None
    assert pretokenizer.split(text) == findall_with_gaps(pattern, text)


def findall_with_gaps(pattern: str, text: str) -> list[bytes]:
    """`regex.finditer`'s non-empty matches, with the text between them as pieces of their own."""
    pieces, end = [], 0
    for match in regex.finditer(pattern, text):
        if match.start() > end:
            pieces.append(text[end : match.start()].encode())
        if match.group(0):
            pieces.append(match.group(0).encode())
        end = match.end()
    if end < len(text):
        pieces.append(text[end:].encode())
    return pieces


def test_text_a_user_regex_skips_becomes_its_own_pre_token() -> None:
    # findall would drop " 12 " and "!"; polytok keeps them as pieces, so encoding stays lossless.
    assert PreTokenizer(r"\p{L}+").split("ab 12 cd!") == [b"ab", b" 12 ", b"cd", b"!"]
    assert PreTokenizer(r"\d").split("x1y") == [b"x", b"1", b"y"]


@settings(max_examples=150, deadline=None)
@given(text=old_unicode_text)
def test_gaps_between_matches_are_kept_in_order(text: str) -> None:
    pattern = r"\p{L}+|\p{N}"
    pieces = PreTokenizer(pattern).split(text)
    assert b"".join(pieces) == text.encode()
    assert [piece for piece in pieces if regex.fullmatch(pattern, piece.decode())] == findall_bytes(pattern, text)


SPECIALS = ["<|endoftext|>", "<|end|>", "<|", "|>", "abc", "bcd", "ab", "<|endoftext|>!"]


def reference_split_with_specials(
    split_text: Callable[[str], list[bytes]], text: str, specials: list[str]
) -> list[bytes]:
    """Leftmost-longest special tokens, then `split_text` on the text between them."""
    pieces: list[bytes] = []
    start = position = 0
    while position < len(text):
        found = [special for special in specials if text.startswith(special, position)]
        if not found:
            position += 1
            continue
        longest = max(found, key=len)
        pieces += split_text(text[start:position])
        pieces.append(longest.encode())
        position = start = position + len(longest)
    return pieces + split_text(text[start:])


@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(st.one_of(st.sampled_from(SPECIALS + ["a", "c", "d", " ", "!", "<", "|"]),
                             tricky_text), max_size=12),
    specials=st.lists(st.sampled_from(SPECIALS), min_size=1, unique=True),
)
def test_special_tokens_are_split_out_first(name: str, parts: list[str], specials: list[str]) -> None:
    text = "".join(parts)
    pretokenizer = PreTokenizer(name, special_tokens=specials)
    expected = reference_split_with_specials(lambda part: findall_bytes(COMPILED[name], part), text, specials)
    assert pretokenizer.split(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<|endoftext|>", [b"<|endoftext|>"]),
        ("<|endoftext|><|endoftext|>", [b"<|endoftext|>", b"<|endoftext|>"]),
        ("<|endoftext|>!", [b"<|endoftext|>!"]),  # the longer special wins
        ("x<|end|>y<|endoftext|>", [b"x", b"<|end|>", b"y", b"<|endoftext|>"]),
        ("abcd", [b"abc", b"d"]),  # overlapping specials: leftmost first
        ("xbcd", [b"x", b"bcd"]),
        (" <|end|> ", [b" ", b"<|end|>", b" "]),  # never merged with the spaces around it
    ],
)
def test_special_token_edge_cases(text: str, expected: list[bytes]) -> None:
    pretokenizer = PreTokenizer("cl100k", special_tokens=["<|endoftext|>", "<|end|>", "<|endoftext|>!", "abc", "bcd"])
    assert pretokenizer.split(text) == expected
    assert pretokenizer.piece_lengths(text).tolist() == [len(piece) for piece in expected]


def reference_split_bytes(name: str, data: bytes) -> list[bytes]:
    """Each maximal valid UTF-8 run split by regex; each maximal invalid run one piece."""
    pieces: list[bytes] = []
    invalid = b""
    rest = data
    while rest:
        try:
            valid, bad, rest = rest.decode("utf-8"), b"", b""
        except UnicodeDecodeError as error:
            valid = rest[: error.start].decode("utf-8")
            bad, rest = rest[error.start : error.end], rest[error.end :]
        if valid:
            if invalid:
                pieces.append(invalid)
                invalid = b""
            pieces += findall_bytes(COMPILED[name], valid)
        invalid += bad
    return pieces + ([invalid] if invalid else [])


@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=200, deadline=None)
@given(data=st.one_of(st.binary(max_size=60), st.lists(st.one_of(st.binary(max_size=3), tricky_text.map(str.encode))).map(b"".join)))
def test_invalid_utf8_is_kept_as_its_own_pieces(name: str, data: bytes) -> None:
    pieces = PreTokenizer(name).split(data)
    assert b"".join(pieces) == data
    assert pieces == reference_split_bytes(name, data)


def test_lone_surrogates_in_str_round_trip() -> None:
    text = "a\ud800b \udfff"
    pieces = PreTokenizer("cl100k").split(text)
    assert b"".join(pieces) == text.encode("utf-8", "surrogatepass")
    assert pieces == [b"a", "\ud800".encode("utf-8", "surrogatepass"), b"b", b" ", "\udfff".encode("utf-8", "surrogatepass")]


@given(text=st.text(max_size=30), specials=st.lists(st.sampled_from(SPECIALS), unique=True))
@settings(max_examples=100, deadline=None)
def test_no_pattern_means_no_split(text: str, specials: list[str]) -> None:
    pretokenizer = PreTokenizer(None, special_tokens=specials)
    assert pretokenizer.preset is None
    whole = lambda part: [part.encode()] if part else []  # noqa: E731
    assert pretokenizer.split(text) == reference_split_with_specials(whole, text, specials)


def test_empty_text_has_no_pieces() -> None:
    for pattern in [*PRESET_NAMES, None, r"\S+|\s+"]:
        assert PreTokenizer(pattern).split(b"") == []


@pytest.mark.parametrize("name", ["cl100K", "gpt4", "o200k_base", "GPT2", "nano_chat", "r50k"])
def test_unknown_preset_names_are_errors(name: str) -> None:
    with pytest.raises(PatternError, match=f"unknown preset '{name}'.*gpt2, cl100k, o200k, nanochat"):
        PreTokenizer(name)


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(\p{L}+", "parenthesis"),
        (r"\p{NotAClass}+", "Unicode property not found"),
        (r"[z-a]", "invalid character class range"),
        ("", "empty pre-tokenisation pattern"),
    ],
)
def test_invalid_regex_is_an_error_naming_it(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError, match=re.escape(reason)) as error:
        PreTokenizer(pattern)
    assert pattern == "" or repr(pattern) in str(error.value)


def test_bad_arguments_are_errors() -> None:
    with pytest.raises(PatternError, match="not int"):
        PreTokenizer(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="special token 1 is ''"):
        PreTokenizer("cl100k", special_tokens=["<|a|>", ""])


def test_regex_backtracking_limit_is_an_error_not_a_crash() -> None:
    pretokenizer = PreTokenizer(r"(?:(?:a|a)+)+(?!a)b|.")
    with pytest.raises(PatternError, match="gave up at byte 0.*backtracking"):
        pretokenizer.split("a" * 40)
    assert pretokenizer.split("b a") == [b"b", b" ", b"a"]
