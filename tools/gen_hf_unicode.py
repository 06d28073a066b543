"""Writes python/polytok/formats/huggingface/unicode_tables.py: the characters whose NFC, NFD,
NFKC, NFKD or Lowercase form, BertNormalizer's cleaning or accent stripping, or BertPreTokenizer's
punctuation class, in `tokenizers`
(its own Unicode tables: older for normal forms and categories, newer for case) differs from
polytok's on Python's tables, each with the form `tokenizers` gives it. Loaded HF pipelines use these to
give tokenizers' ids on every character. Run with the `tokenizers` the tests compare against:

    python tools/gen_hf_unicode.py
"""
from __future__ import annotations

import os
import sys
import unicodedata
from pathlib import Path

import tokenizers
from tokenizers import normalizers

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
from polytok.formats.huggingface.normalizers import bert_clean, bert_strip_accents, python_lowercase  # noqa: E402

OUT = ROOT / "python" / "polytok" / "formats" / "huggingface" / "unicode_tables.py"


def differences(hf, python) -> dict[str, str]:
    found = {}
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        theirs = hf.normalize_str(char)
        if theirs != python(char):
            found[char] = theirs
    return found


def reordered_differently(hf, python) -> dict[str, str]:
    """Combining marks whose canonical class tokenizers does not know (it leaves them where they
    stand, as starters): found by normalising them between marks of classes 220 and 230. Each
    maps to its own form in tokenizers, so normalizers.py normalises the text around it apart."""
    found = {}
    for code in range(0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF or not unicodedata.combining(char):
            continue
        for probe in ("a\u0301" + char + "\u0323", "a" + char + "\u0323\u0301", "a\u0323" + char):
            if hf.normalize_str(probe) != python(probe):
                found[char] = hf.normalize_str(char)
                break
    return found


def bert_punctuation_differences() -> tuple[list[int], list[int]]:
    """The code points BertPreTokenizer isolates as punctuation that polytok's class (Unicode
    category P and ASCII punctuation, on the `regex` module's tables) does not hold, and those it
    holds that BertPreTokenizer does not isolate: tokenizers' category tables are older."""
    import regex

    from polytok.formats.huggingface.pre_tokenizers import BASE_BERT_PUNCTUATION

    ours = regex.compile(f"[{BASE_BERT_PUNCTUATION}]")
    bert = tokenizers.pre_tokenizers.BertPreTokenizer()
    added, removed = [], []
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        theirs = [piece for piece, _ in bert.pre_tokenize_str("a" + char + "a")] == ["a", char, "a"]
        mine = ours.fullmatch(char) is not None
        if theirs and not mine:
            added.append(code)
        elif mine and not theirs:
            removed.append(code)
    return added, removed


def shared(tables: dict[str, dict[str, str]], names: tuple[str, ...]) -> dict[str, str]:
    """The entries (character and form alike) every table in `names` holds."""
    first, *others = (tables[name] for name in names)
    return {char: form for char, form in first.items() if all(other.get(char) == form for other in others)}


def entries(table: dict[str, str], indent: str) -> list[str]:
    return [f"{indent}{ascii(char)}: {ascii(form)}," for char, form in sorted(table.items())]


def main() -> None:
    forms = {form: getattr(normalizers, form)() for form in ("NFC", "NFD", "NFKC", "NFKD")}
    tables = {}
    for form, hf in forms.items():
        python = lambda text, form=form: unicodedata.normalize(form, text)  # noqa: E731
        tables[form] = {**reordered_differently(hf, python), **differences(hf, python)}
    tables["Lowercase"] = differences(normalizers.Lowercase(), python_lowercase)
    # BertNormalizer's two steps that read character classes, each on its own.
    off = dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    tables["BertClean"] = differences(normalizers.BertNormalizer(**{**off, "clean_text": True}), bert_clean)
    tables["BertStripAccents"] = differences(normalizers.BertNormalizer(**{**off, "strip_accents": True}),
                                             bert_strip_accents)
    # Entries several tables share are written once, as named groups the tables unpack.
    groups = {
        "_ALL_NORMAL_FORMS": shared(tables, ("NFC", "NFD", "NFKC", "NFKD")),
        "_COMPATIBILITY_FORMS": shared(tables, ("NFKC", "NFKD")),
    }
    members = {"NFC": ["_ALL_NORMAL_FORMS"], "NFD": ["_ALL_NORMAL_FORMS"],
               "NFKC": ["_ALL_NORMAL_FORMS", "_COMPATIBILITY_FORMS"], "NFKD": ["_ALL_NORMAL_FORMS", "_COMPATIBILITY_FORMS"]}
    groups["_COMPATIBILITY_FORMS"] = {char: form for char, form in groups["_COMPATIBILITY_FORMS"].items()
                                      if char not in groups["_ALL_NORMAL_FORMS"]}
    lines = [
        f'"""Generated by tools/gen_hf_unicode.py from tokenizers {tokenizers.__version__} and Python',
        f"{unicodedata.unidata_version} Unicode data: per normaliser, each character that tokenizers normalises",
        "differently from Python (alone, or in how combining marks around it are ordered), mapped to",
        'the form tokenizers gives it alone. Do not edit."""',
        "",
    ]
    for name, group in groups.items():
        lines += [f"{name}: dict[str, str] = {{", *entries(group, "    "), "}", ""]
    lines.append("OVERRIDES: dict[str, dict[str, str]] = {")
    for name, table in tables.items():
        own = {char: form for char, form in table.items()
               if not any(char in groups[group] for group in members.get(name, []))}
        unpacked = "".join(f"**{group}, " for group in members.get(name, []))
        lines += [f"    {name!r}: {{{unpacked.rstrip()}", *entries(own, "        "), "    },"]
    lines.append("}")
    added, removed = bert_punctuation_differences()
    lines += ["", "# Code points BertPreTokenizer and Punctuation isolate beyond polytok's punctuation class, and",
              "# those in it that they do not (tokenizers' older category tables).",
              f"BERT_PUNCTUATION_ADDED: tuple[int, ...] = ({''.join(f'{c:#x}, ' for c in added)})",
              f"BERT_PUNCTUATION_REMOVED: tuple[int, ...] = ({''.join(f'{c:#x}, ' for c in removed)})"]
    temporary = OUT.with_suffix(".tmp")
    temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(temporary, OUT)
    print({name: len(table) for name, table in tables.items()}, "punctuation +", len(added), "-", len(removed), "->", OUT)


if __name__ == "__main__":
    main()
