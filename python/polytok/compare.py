"""Compare tokenisers on texts: tokens, tokens per word and bytes per token of each tokeniser on
each text; for parallel texts (the same content in several languages) each language's cost
relative to a reference language, "the tax", and the Gini coefficient of that cost across
languages; and how one sample sentence is cut by each tokeniser, for a terminal and for HTML.

Tokenisers can be polytok files, tiktoken rank files, HF `tokenizer.json` and SentencePiece
models, through polytok's readers.
"""
from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from polytok import formats
from polytok.errors import ConfigError, CorpusError
from polytok.metrics import TokenizerView, evaluate_documents, tokenizer_name
from polytok.tables import format_table, format_value

COSTS = ("tokens", "tokens_per_byte", "tokens_per_line")

# Background colours of alternate tokens: a light palette, read with black text on any terminal.
ANSI_BACKGROUNDS = (153, 223, 194, 217, 189, 230)
HTML_BACKGROUNDS = ("#b3d4fc", "#ffd8a8", "#c3f0c8", "#ffc9c9", "#d0bfff", "#fff3bf")
SAMPLE_CHARACTERS = 160


# --------------------------------------------------------------------------- reading tokenisers


def load_tokenizers(paths: Sequence[str | os.PathLike], **options: Any) -> dict[str, Any]:
    """Load several tokeniser files of any format (`polytok.load`, which takes `options`),
    named by file stem (by full path where stems collide)."""
    stems = [Path(path).stem for path in paths]
    names = [stem if stems.count(stem) == 1 else str(path) for stem, path in zip(stems, paths)]
    return {name: formats.load(path, **options) for name, path in zip(names, paths)}


def read_texts(paths: Sequence[str | os.PathLike]) -> dict[str, str]:
    """Read text files (UTF-8) into {file stem: text}; an empty or undecodable file is an error."""
    texts: dict[str, str] = {}
    for path in paths:
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as error:
            raise CorpusError(f"cannot read text file {path}: {error.strerror or error}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(f"text file {path} is not UTF-8: invalid byte at offset {error.start}") from None
        name = path.stem if path.stem not in texts else str(path)
        texts[name] = text
    return texts


def named_tokenizers(tokenizers: Mapping[str, Any] | Iterable[Any], purpose: str = "compare") -> dict[str, Any]:
    """{name: tokenizer} from a mapping, or from a sequence named by each tokeniser's `name` or
    position; `purpose` names the caller's job in the error for none."""
    if isinstance(tokenizers, Mapping):
        named = dict(tokenizers)
    else:
        named = {}
        for position, tokenizer in enumerate(tokenizers):
            name = tokenizer_name(tokenizer, position)
            named[name if name not in named else f"{name}-{position + 1}"] = tokenizer
    if not named:
        raise ConfigError(f"no tokenisers to {purpose}: pass at least one tokeniser, as {{name: tokenizer}} or a list")
    return named


# --------------------------------------------------------------------------- compare


def gini(costs: Sequence[float]) -> float:
    """Gini coefficient of costs, each language weighted equally: sum_ij |c_i - c_j| / (2 n^2 mean).
    0 is parity; it approaches 1 when one language carries all the cost."""
    values = [float(cost) for cost in costs]
    mean = sum(values) / len(values)
    if mean == 0:
        return 0.0
    spread = sum(abs(a - b) for a in values for b in values)
    return spread / (2 * len(values) ** 2 * mean)


def _cost(row: Mapping[str, Any], cost: str) -> float | int:
    if cost == "tokens":
        return row["tokens"]
    if cost == "tokens_per_byte":
        return row["tokens"] / row["bytes"]
    if not row["lines"]:
        raise CorpusError(f"text {row['text']!r} has no non-blank line, so it has no cost per line")
    return row["tokens"] / row["lines"]


def _default_sample(text: str) -> str:
    """The first non-blank line, cut at a word boundary to at most SAMPLE_CHARACTERS."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(line) <= SAMPLE_CHARACTERS:
        return line
    cut = line.rfind(" ", 0, SAMPLE_CHARACTERS)
    return line[: cut if cut > 0 else SAMPLE_CHARACTERS]


def cut(tokenizer: Any, text: str) -> dict[str, Any]:
    """How `tokenizer` cuts `text`: its ids, and each token's bytes shown as text (bytes that are
    not UTF-8 on their own as \\x escapes)."""
    view = TokenizerView(tokenizer)
    ids = [int(i) for i in view.encode_batch([text], None)[0]]
    pieces = [piece.decode("utf-8", "backslashreplace") for piece in view.pieces(ids)]
    return {"ids": ids, "pieces": pieces}


def compare(
    tokenizers: Mapping[str, Any] | Sequence[Any],
    texts: Mapping[str, str | bytes],
    *,
    reference: str | None = None,
    cost: str = "tokens",
    sample: str | None = None,
    num_threads: int | None = None,
) -> dict[str, Any]:
    """Measure each tokeniser on each text ({name: text}); the tax of each text relative to
    `reference` (default: the first text) and the Gini coefficient of the costs across texts, per
    tokeniser; and the cuts of `sample` (default: the reference text's first line).

    `cost` is what a text costs: "tokens" (parallel texts, the same content in each language),
    "tokens_per_byte" or "tokens_per_line" (line-aligned texts)."""
    named = named_tokenizers(tokenizers)
    if cost not in COSTS:
        raise ConfigError(f"unknown cost {cost!r}: expected one of {', '.join(COSTS)}")
    if not texts:
        raise ConfigError("compare needs at least one text")
    for name, text in texts.items():
        if not isinstance(text, (str, bytes)):
            raise CorpusError(f"text {name!r} is a {type(text).__name__}, expected str or bytes")
        if not text.strip():
            raise CorpusError(f"text {name!r} is empty")
    reference = next(iter(texts)) if reference is None else reference
    if reference not in texts:
        raise ConfigError(f"reference text {reference!r} is not among the texts: {', '.join(texts)}")

    rows: list[dict[str, Any]] = []
    gini_by_tokenizer: dict[str, float] = {}
    for tokenizer_label, tokenizer in named.items():
        measured = {
            text_name: evaluate_documents(tokenizer, [text], num_threads=num_threads)
            for text_name, text in texts.items()
        }
        costs = {}
        for text_name, metrics in measured.items():
            row = {"tokenizer": tokenizer_label, "text": text_name}
            row.update({key: metrics[key] for key in (
                "bytes", "characters", "words", "lines", "tokens",
                "tokens_per_word", "bytes_per_token", "characters_per_token", "tokens_per_line",
            )})
            costs[text_name] = _cost(row, cost)
            row["cost"] = costs[text_name]
            rows.append(row)
        for row in rows[-len(texts):]:
            row["tax"] = costs[row["text"]] / costs[reference]
        gini_by_tokenizer[tokenizer_label] = gini(list(costs.values()))

    if sample is None:
        reference_text = texts[reference]
        if isinstance(reference_text, bytes):
            reference_text = reference_text.decode("utf-8", "replace")
        sample = _default_sample(reference_text)
    return {
        "tokenizers": list(named),
        "texts": list(texts),
        "reference": reference,
        "cost": cost,
        "rows": rows,
        "gini": gini_by_tokenizer,
        "sample": {"text": sample, "cuts": {label: cut(tokenizer, sample) for label, tokenizer in named.items()}},
    }


# --------------------------------------------------------------------------- views


def _visible(piece: str) -> str:
    # Line ends and tabs would break the one-line view; show them as arrows.
    return piece.replace("\r", "␍").replace("\n", "↵").replace("\t", "→")


def render_terminal(comparison: Mapping[str, Any], colour: bool = True) -> str:
    """The sample's cuts, one tokeniser a line, alternate tokens on coloured backgrounds (ANSI);
    without colour, tokens are separated by '|'."""
    sample = comparison["sample"]
    lines = [f"sample: {_visible(sample['text'])}"]
    width = max(len(label) for label in sample["cuts"])
    for label, cuts in sample["cuts"].items():
        pieces = [_visible(piece) for piece in cuts["pieces"]]
        if colour:
            shown = "".join(
                f"\x1b[30;48;5;{ANSI_BACKGROUNDS[i % len(ANSI_BACKGROUNDS)]}m{piece}\x1b[0m"
                for i, piece in enumerate(pieces)
            )
        else:
            shown = "|".join(pieces)
        lines.append(f"{label.ljust(width)}  {len(pieces):>4} tokens  {shown}")
    return "\n".join(lines)


def render_html(comparison: Mapping[str, Any]) -> str:
    """The sample's cuts as an HTML fragment: one row per tokeniser, each token a coloured span
    whose title gives its id."""
    sample = comparison["sample"]
    rows = []
    for label, cuts in sample["cuts"].items():
        spans = "".join(
            f'<span class="token" style="background:{HTML_BACKGROUNDS[i % len(HTML_BACKGROUNDS)]}" '
            f'title="id {identifier}">{html.escape(_visible(piece))}</span>'
            for i, (identifier, piece) in enumerate(zip(cuts["ids"], cuts["pieces"]))
        )
        rows.append(
            f"<tr><th>{html.escape(label)}</th><td class=\"count\">{len(cuts['ids'])}</td>"
            f"<td class=\"cut\">{spans}</td></tr>"
        )
    return (
        f'<p class="sample">{html.escape(sample["text"])}</p>\n'
        '<table class="cuts"><tr><th>tokeniser</th><th>tokens</th><th>cut</th></tr>\n'
        + "\n".join(rows)
        + "\n</table>"
    )


ROW_FIELDS = ("tokenizer", "text", "bytes", "words", "tokens", "tokens_per_word", "bytes_per_token",
              "characters_per_token", "cost", "tax")


def format_comparison(comparison: Mapping[str, Any]) -> str:
    """The comparison as text tables: per tokeniser and text, then the Gini coefficient per tokeniser."""
    rows = [[field for field in ROW_FIELDS]] + [
        [str(row[field]) if field in ("tokenizer", "text") else format_value(row[field]) for field in ROW_FIELDS]
        for row in comparison["rows"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(ROW_FIELDS))]
    table = "\n".join(
        "  ".join(cell.ljust(width) if i < 2 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths)))
        for row in rows
    )
    gini_table = format_table({"gini": comparison["gini"]}, keys=list(comparison["gini"]), label="tokenizer")
    return (
        f"{table}\n\ncost = {comparison['cost']}; tax = cost / cost of {comparison['reference']!r}\n"
        f"Gini coefficient of the cost across texts (0 = parity):\n{gini_table}"
    )
