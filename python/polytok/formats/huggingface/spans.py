"""Where each token of a loaded tokenizer.json's word lies in that word, as `tokenizers` places
it, for offsets: a token covers its own text, except that a WordPiece continuation token
covers its text after the continuation prefix, a WordPiece unknown token covers its whole
word, a byte-fallback token covers its one byte, and a BPE or Unigram unknown token covers the
run of characters it replaced (characters that are no token by themselves; several when the
model fuses unknown tokens).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WordModel:
    """What placing tokens in a word needs of a file's model: `surfaces[i]` is the UTF-8 text
    token i covers where it starts a word (its bytes as the model reads them), `unk` the
    unknown token's id, `continuation` WordPiece's prefix (None for BPE and Unigram), `known`
    the characters that are tokens by themselves and `fuse_unk` whether unknown tokens of
    neighbouring characters are one."""

    surfaces: list[bytes]
    unk: int | None
    continuation: bytes | None
    known: frozenset[str]
    fuse_unk: bool

    def lengths(self, word: str, ids: list[int]) -> list[int] | None:
        """The byte length in `word` (UTF-8) of each token of `ids`, the word's tokens in
        order; None where they do not tile it."""
        data = word.encode("utf-8")
        if self.continuation is not None:
            if ids == [self.unk] and data != self.surfaces[self.unk]:
                return [len(data)]
            prefix = self.continuation
            surfaces = [self.surfaces[token_id] if index == 0 or not self.surfaces[token_id].startswith(prefix)
                        else self.surfaces[token_id][len(prefix):] for index, token_id in enumerate(ids)]
        else:
            surfaces = [None if token_id == self.unk else self.surfaces[token_id] for token_id in ids]
        out: list[int] = []
        at = 0
        for index, surface in enumerate(surfaces):
            if surface is None:
                end = self._unknown_end(data, at, surfaces[index + 1] if index + 1 < len(surfaces) else b"")
                if end is None:
                    return None
                out.append(end - at)
                at = end
                continue
            if not data.startswith(surface, at):
                return None
            out.append(len(surface))
            at += len(surface)
        return out if at == len(data) else None

    def _unknown_end(self, data: bytes, at: int, following: bytes | None) -> int | None:
        """Where an unknown token starting at byte `at` ends: after one unknown character, or
        (fused) after the longest run of them that the next token's text follows (the word's
        end for a last token; any end when the next token is unknown too)."""
        if at < len(data) and data[at] & 0xC0 == 0x80:
            return None  # inside a character
        ends = []
        position = at
        for char in data[at:].decode("utf-8"):
            if char in self.known:
                break
            position += len(char.encode("utf-8"))
            ends.append(position)
            if not self.fuse_unk:
                break
        for end in reversed(ends):
            if following is None or (data.startswith(following, end) and (following or end == len(data))):
                return end
        return None


def is_white_space(char: str) -> bool:
    """Unicode White_Space, what the pre-tokenisers split on (`\\p{White_Space}`, Rust's
    `char::is_whitespace`); `str.isspace` also counts U+001C to U+001F, which are not."""
    return char.isspace() and not "\x1c" <= char <= "\x1f"


def spelled_alignment(spelled: str, seen: str, origin: list[int]) -> list[int] | None:
    """The alignment of `spelled` (the pre-tokeniser's words back to back) given that of `seen`
    (the normalised text they came from): characters they share keep theirs, whitespace only
    `spelled` has (a prefix space) takes that of the character after it, as `tokenizers` aligns
    a prepended character, and whitespace only `seen` has (dropped by the pre-tokeniser) is
    skipped. None where they differ otherwise."""
    if spelled == seen:
        return origin
    out: list[int] = []
    at = 0
    for char in spelled:
        while at < len(seen) and seen[at] != char and not is_white_space(char) and is_white_space(seen[at]):
            at += 1
        if at < len(seen) and seen[at] == char:
            out.append(origin[at])
            at += 1
        elif is_white_space(char):
            out.append(origin[at] if at < len(origin) else (origin[-1] if origin else -1))
        else:
            return None
    if any(not is_white_space(char) for char in seen[at:]):
        return None
    return out
