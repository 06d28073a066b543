"""polytok.tables: how numbers are shown, text tables, CSV in full precision, long rows."""
from __future__ import annotations

import csv
import io

import numpy as np

from polytok.tables import format_table, format_value, long_rows, scalars, to_csv


def test_format_value():
    assert format_value(None) == "-"
    assert format_value(1234567) == "1,234,567"
    assert format_value(np.int64(42)) == "42"
    assert format_value(2 / 3) == "0.6667"
    assert format_value(np.float32(1.5)) == "1.5"
    assert format_value(True) == "True"
    assert format_value("bpe") == "bpe"


def test_format_table_aligns_labels_left_and_numbers_right():
    table = format_table({"a": {"tokens": 1000, "ratio": 0.5, "curve": [1, 2]}, "bb": {"tokens": 7, "ratio": None}})
    assert table.splitlines() == [
        "metric      a  bb",
        "tokens  1,000   7",
        "ratio     0.5   -",
    ]
    assert format_table({"gini": {"x": 0.25}}, keys=["x"], label="tokenizer").splitlines()[0] == "tokenizer  gini"


def test_to_csv_keeps_full_precision_and_blanks_none():
    text = to_csv([{"name": "a", "value": 1 / 3, "extra": 1}, {"name": "b", "value": None}], ["name", "value"])
    assert text.splitlines()[0] == "name,value"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows == [{"name": "a", "value": repr(1 / 3)}, {"name": "b", "value": ""}]


def test_scalars_and_long_rows():
    result = {"tokens": 5, "name": "x", "curves": {"rank": [1]}, "matrix": [[1.0]]}
    assert scalars(result) == {"tokens": 5, "name": "x"}
    assert long_rows({"tok": result}, "tokenizer") == [
        {"tokenizer": "tok", "metric": "tokens", "value": 5},
        {"tokenizer": "tok", "metric": "name", "value": "x"},
    ]
