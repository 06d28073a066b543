"""Results as tables: numbers formatted for a terminal, dicts of results as text tables and CSV.

A result is a flat dict of metric -> value (nested curves and tables are left out of tables);
`evaluate`, `corpus_stats`, `stability`, `compare` and `report` all print through these helpers.
"""
from __future__ import annotations

import csv
import io
from typing import Any, Iterable, Mapping, Sequence

import numpy as np


def format_value(value: Any) -> str:
    """A number as a table shows it: integers with separators, floats to 4 significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    return f"{float(value):.4g}"


def format_table(columns: Mapping[str, Mapping[str, Any]], keys: Sequence[str] | None = None, label: str = "metric") -> str:
    """A text table: one row per key (metric), one column per named result."""
    names = list(columns)
    if keys is None:
        keys = [key for key, value in next(iter(columns.values())).items() if not isinstance(value, (dict, list))]
    rows = [[label, *names]] + [[key, *(format_value(columns[name].get(key)) for name in names)] for key in keys]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths)))
        for row in rows
    ]
    return "\n".join(lines)


def to_csv(rows: Iterable[Mapping[str, Any]], fields: Sequence[str]) -> str:
    """CSV text of `rows` (dicts), numbers written in full precision."""
    stream = io.StringIO()
    writer = csv.DictWriter(stream, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: ("" if row.get(key) is None else row.get(key)) for key in fields})
    return stream.getvalue()


def scalars(result: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a result that are numbers or strings (not curves, tables or nested dicts)."""
    return {key: value for key, value in result.items() if not isinstance(value, (dict, list))}


def long_rows(columns: Mapping[str, Mapping[str, Any]], label: str) -> list[dict[str, Any]]:
    """Named results as (label, metric, value) rows, one per scalar entry: the long form CSV wants."""
    return [
        {label: name, "metric": key, "value": value}
        for name, result in columns.items()
        for key, value in scalars(result).items()
    ]
