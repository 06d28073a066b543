"""A HF file's added tokens are found as `tokenizers` finds them: leftmost-longest, `lstrip` and
`rstrip` taking Unicode whitespace, raw and normalised ones apart, in time linear in the text
whatever the number of tokens. Checked id for id against `tokenizers` on the fixtures of
tests/data/readers (made with `tokenizers`) with added tokens of their own."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import EncodeError

READERS = Path(__file__).resolve().parents[2] / "data" / "readers"
tokenizers = pytest.importorskip("tokenizers")

# contents that overlap (one a prefix of another, one inside another), one starting with a
# space, one in CJK and one with a letter NFC changes
CONTENTS = ["<a>", "<a><b>", "<b>", "zq#", " <sp>", "末尾", "Cafe\u0301", "[[x]]", "x]]"]
# whitespace `tokenizers` strips (White_Space) and two characters it does not (U+001C, U+200B)
SPACES = [" ", "  ", "\t", "\n", "\u3000", "\u00a0", "\x1c", "\u200b", ""]


def with_added(name: str, flags: list[tuple[bool, bool, bool, bool]], path: Path) -> Path:
    """The fixture `name` with CONTENTS as added tokens, token i with flags[i] = (special,
    normalized, lstrip, rstrip), written to `path`."""
    record: dict[str, Any] = json.loads((READERS / name).read_text(encoding="utf-8"))
    next_id = max([len(record["model"]["vocab"]), *(token["id"] + 1 for token in record.get("added_tokens") or [])])
    record["added_tokens"] = [*(record.get("added_tokens") or []), *(
        {"id": next_id + index, "content": content, "special": special, "normalized": normalized, "lstrip": lstrip,
         "rstrip": rstrip, "single_word": False}
        for index, (content, (special, normalized, lstrip, rstrip)) in enumerate(zip(CONTENTS, flags)))]
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


FLAGS = st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
                 min_size=len(CONTENTS), max_size=len(CONTENTS))
TEXTS = st.lists(st.one_of(st.sampled_from(CONTENTS), st.sampled_from(SPACES), st.sampled_from(["word", "é", "b", "]"]),
                           st.text(max_size=4)), max_size=14).map("".join)


@pytest.mark.parametrize("name", ["hf-bpe-byte-level.json", "hf-bpe-llama.json", "hf-wordpiece.json", "hf-unigram.json"])
@settings(max_examples=40, deadline=None)
@given(flags=FLAGS, texts=st.lists(TEXTS, min_size=1, max_size=6))
def test_added_tokens_are_found_as_tokenizers_finds_them(tmp_path_factory, name, flags, texts):
    path = with_added(name, flags, tmp_path_factory.mktemp("added") / "tokenizer.json")
    ours, peer = polytok.load(path), tokenizers.Tokenizer.from_file(str(path))
    for text in texts:
        expected = peer.encode(text, add_special_tokens=False).ids
        assert ours.encode(text, allowed_special="all") == expected, text
        assert ours.encode_batch([text, text], allowed_special="all") == [expected, expected]
        assert ours.encode_with_offsets(text, allowed_special="all")[0] == expected


def test_twenty_thousand_added_tokens_cost_the_texts_length(tmp_path):
    # each text position was tried against every token's regex alternative: 37 s for 100,000
    # characters with 20,000 tokens, now one Aho-Corasick pass
    record: dict[str, Any] = json.loads((READERS / "hf-bpe-byte-level.json").read_text(encoding="utf-8"))
    size = len(record["model"]["vocab"])
    record["added_tokens"] = [{"id": size + index, "content": f"<tok{index}>", "special": index % 2 == 0, "normalized": False,
                               "lstrip": index % 3 == 0, "rstrip": index % 5 == 0, "single_word": False}
                              for index in range(20_000)]
    path = tmp_path / "many.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    ours, peer = polytok.load(path), tokenizers.Tokenizer.from_file(str(path))
    text = "some words <tok7>  and <tok12345>\u3000more <tok10> text " * 2_000
    assert ours.encode(text, allowed_special="all") == peer.encode(text, add_special_tokens=False).ids
    with pytest.raises(EncodeError, match="'<tok10>'"):
        ours.encode(text)
    assert ours.encode(text, disallowed_special=()) == ours.encode_ordinary(text)
