"""One self-contained HTML report of tokenisers on texts: intrinsic metrics, the comparison across
languages with its tax and Gini coefficient, the sample sentence's cuts, the corpus's Zipf and
Heaps fits, and their plots embedded as base64 PNG. The same numbers go to JSON and CSV beside it.
"""
from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from polytok import checks
from polytok.files import atomic_write
from polytok.certify import BudgetRow, Certificate
from polytok.compare import compare, named_tokenizers, render_html
from polytok.errors import ConfigError, CorpusError, FormatError
from polytok.metrics import corpus_stats, corpus_stats_of_documents, evaluate, evaluate_documents
from polytok.tables import format_value, scalars, to_csv

CSV_FIELDS = ("section", "tokenizer", "text", "metric", "value")


# --------------------------------------------------------------------------- numbers


def build_report(
    tokenizers: Mapping[str, Any] | Sequence[Any],
    texts: Mapping[str, str],
    *,
    corpus: Any = None,
    reference: str | None = None,
    cost: str = "tokens",
    sample: str | None = None,
    title: str = "polytok report",
    num_threads: int | None = None,
    lm: Mapping[str, Any] | None = None,
    certificates: Sequence[Mapping[str, Any]] | None = None,
    **corpus_reader_options: Any,
) -> dict[str, Any]:
    """All the report's numbers: `compare` on the texts, and `evaluate` and `corpus_stats` on the
    corpus (by default the texts themselves, taken together); `lm`, results of `polytok.lm.evaluate`,
    adds their validation bits per byte and its plot against the vocabulary size; `certificates`,
    the JSON of `polytok certify --budgets ... --json`, adds the table of bounds and the
    gap-vs-budget plot."""
    tokenizers = named_tokenizers(tokenizers)
    comparison = compare(tokenizers, texts, reference=reference, cost=cost, sample=sample, num_threads=num_threads)
    if corpus is None:
        documents = list(texts.values())
        evaluation = {
            name: evaluate_documents(tokenizer, documents, num_threads=num_threads)
            for name, tokenizer in tokenizers.items()
        }
        statistics = corpus_stats_of_documents(documents)
        if statistics is None:
            raise CorpusError("the texts hold no words")
        corpus_label = "the texts, together"
    else:
        evaluation = {
            name: evaluate(tokenizer, corpus, num_threads=num_threads, **corpus_reader_options)
            for name, tokenizer in tokenizers.items()
        }
        statistics = corpus_stats(corpus, **corpus_reader_options)
        corpus_label = ", ".join(map(str, corpus)) if isinstance(corpus, (list, tuple)) else str(corpus)
    report = {
        "title": title,
        "corpus": corpus_label,
        "evaluation": evaluation,
        "comparison": comparison,
        "corpus_stats": statistics,
    }
    if lm is not None:
        report["lm"] = _checked_lm(lm)
    if certificates is not None:
        report["certificates"] = _checked_certificates(certificates)
    return report


def _checked_certificates(rows: Any) -> list[dict[str, Any]]:
    """The rows of `polytok certify --budgets ... --json` (a certificate and the roundings' token
    counts per budget), each with its counts as % of the bound; FormatError where they are not."""
    if not isinstance(rows, list) or not rows:
        raise FormatError("certificates: expected a non-empty list of budgets (the JSON that "
                          "polytok certify --budgets ... --json prints)")
    checked = []
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping) or set(row) != {"certificate", "roundings"}:
            raise FormatError(f"certificates entry {index}: expected an object with 'certificate' and 'roundings'")
        roundings = row["roundings"]
        if not isinstance(roundings, Mapping) or not all(
                isinstance(name, str) and checks.is_integer(count) and count >= 0
                for name, count in roundings.items()):
            raise FormatError(f"certificates entry {index}: 'roundings' must map each rounding to a token count")
        try:
            certificate = Certificate.from_dict(dict(row["certificate"]))
        except (FormatError, TypeError) as error:
            raise FormatError(f"certificates entry {index}: {error}") from None
        budget_row = BudgetRow(certificate, dict(roundings))
        checked.append({"budget": certificate.budget, "bound": certificate.bound, "status": certificate.status,
                        "covers": certificate.covers, "percent_of_bound": budget_row.percentages()})
    return sorted(checked, key=lambda row: row["budget"])


def _checked_lm(lm: Mapping[str, Any]) -> dict[str, Any]:
    """LM results as polytok.lm.evaluate returns them; FormatError where they are not."""
    results = lm.get("results") if isinstance(lm, Mapping) else None
    fields = ("family", "vocab_size", "valid_bpb", "valid_bpb_stderr")
    if not isinstance(results, Mapping) or not results or not all(
        isinstance(result, Mapping) and all(field in result for field in fields) for result in results.values()
    ):
        raise FormatError(f"LM results need a non-empty 'results' mapping whose entries have {', '.join(fields)} "
                          "(the JSON that polytok lm-eval -o writes)")
    return dict(lm)


def report_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every number of the report as (section, tokenizer, text, metric, value) rows."""
    rows: list[dict[str, Any]] = []
    for name, metrics in report["evaluation"].items():
        rows += [{"section": "evaluation", "tokenizer": name, "metric": key, "value": value}
                 for key, value in scalars(metrics).items()]
    comparison = report["comparison"]
    for row in comparison["rows"]:
        rows += [{"section": "comparison", "tokenizer": row["tokenizer"], "text": row["text"], "metric": key,
                  "value": value} for key, value in row.items() if key not in ("tokenizer", "text")]
    rows += [{"section": "gini", "tokenizer": name, "metric": f"gini_{comparison['cost']}", "value": value}
             for name, value in comparison["gini"].items()]
    rows += [{"section": "corpus_stats", "metric": key, "value": value}
             for key, value in scalars(report["corpus_stats"]).items()]
    for row in report.get("certificates", []):
        rows.append({"section": "certificates", "metric": f"bound_K{row['budget']}", "value": row["bound"]})
        rows += [{"section": "certificates", "tokenizer": name, "metric": f"percent_of_bound_K{row['budget']}",
                  "value": value} for name, value in row["percent_of_bound"].items()]
    for name, result in report.get("lm", {}).get("results", {}).items():
        rows += [{"section": "lm", "tokenizer": name, "metric": key, "value": value}
                 for key, value in scalars(result).items()]
    return rows


# --------------------------------------------------------------------------- plots


def _figure(width: float = 6.4, height: float = 3.6):
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plots need matplotlib, a dependency of polytok: pip install matplotlib") from None

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    # No "Software" entry: the PNG then depends only on the numbers, not on matplotlib's version.
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def plot_rank_frequency(statistics: Mapping[str, Any]) -> bytes:
    """Word frequency against rank, log-log, with the fitted Zipf line anchored at rank 1."""
    curves = statistics["curves"]
    figure = _figure()
    axes = figure.add_subplot()
    axes.loglog(curves["rank"], curves["frequency"], ".", markersize=3, label="words")
    alpha = statistics["zipf_alpha"]
    if alpha is not None:
        top = curves["frequency"][0]
        axes.loglog(curves["rank"], [top * rank ** -alpha for rank in curves["rank"]], "-",
                    label=f"Zipf, α = {alpha:.2f}")
    axes.set_xlabel("rank")
    axes.set_ylabel("frequency")
    axes.set_title("Rank-frequency")
    axes.legend()
    return _png(figure)


def plot_growth(statistics: Mapping[str, Any]) -> bytes:
    """Distinct words against words read, log-log, with the fitted Heaps curve."""
    curves = statistics["curves"]
    figure = _figure()
    axes = figure.add_subplot()
    axes.loglog(curves["words_read"], curves["distinct_words"], ".", markersize=3, label="distinct words")
    k, beta = statistics["heaps_k"], statistics["heaps_beta"]
    if k is not None:
        axes.loglog(curves["words_read"], [k * n ** beta for n in curves["words_read"]], "-",
                    label=f"Heaps, K = {k:.2f}, β = {beta:.2f}")
    axes.set_xlabel("words read")
    axes.set_ylabel("distinct words")
    axes.set_title("Vocabulary growth")
    axes.legend()
    return _png(figure)


def _grouped_bars(comparison: Mapping[str, Any], field: str, title: str, unit_line: float | None = None) -> bytes:
    texts, names = comparison["texts"], comparison["tokenizers"]
    value = {(row["tokenizer"], row["text"]): row[field] for row in comparison["rows"]}
    figure = _figure(max(6.4, 1.2 * len(texts) + 2), 3.6)
    axes = figure.add_subplot()
    width = 0.8 / len(names)
    for position, name in enumerate(names):
        xs = [i + (position - (len(names) - 1) / 2) * width for i in range(len(texts))]
        axes.bar(xs, [value[(name, text)] or 0.0 for text in texts], width, label=name)
    if unit_line is not None:
        axes.axhline(unit_line, color="black", linewidth=0.8)
    axes.set_xticks(range(len(texts)), texts, rotation=20, ha="right")
    axes.set_title(title)
    axes.legend(fontsize="small")
    return _png(figure)


def plot_tokens_per_word(comparison: Mapping[str, Any]) -> bytes:
    """Tokens per whitespace-separated word, per text, one bar per tokeniser."""
    return _grouped_bars(comparison, "tokens_per_word", "Tokens per word")


def plot_tax(comparison: Mapping[str, Any]) -> bytes:
    """Each text's cost relative to the reference text, one bar per tokeniser; 1 is parity."""
    return _grouped_bars(comparison, "tax", f"Cost relative to {comparison['reference']} ({comparison['cost']})", 1.0)


def plot_gap_vs_budget(percentages: Mapping[int, Mapping[str, float | None]]) -> bytes:
    """Each tokeniser's token count over the certified bound (in %) against the budget K, one
    line per tokeniser, K on a log scale: `{K: {"BPE": 103.1, "Det": 100.4, ...}}`, the numbers
    of `polytok.certify.BudgetRow.percentages` (`polytok certify --budgets ... --plot`)."""
    budgets = sorted(percentages)
    names = list(dict.fromkeys(name for budget in budgets for name in percentages[budget]))
    figure = _figure()
    axes = figure.add_subplot()
    for name in names:
        points = [(budget, percentages[budget].get(name)) for budget in budgets]
        points = [(budget, value - 100.0) for budget, value in points if value is not None]
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    axes.set_xscale("log", base=2)
    axes.set_xlabel("budget K (tokens beyond the 256 bytes)")
    axes.set_ylabel("tokens over the certified bound (%)")
    axes.axhline(0.0, color="black", linewidth=0.8)
    axes.set_title("Gap to the certified lower bound")
    axes.legend(fontsize="small")
    return _png(figure)


def plot_bpb_vocabulary(lm: Mapping[str, Any]) -> bytes:
    """Validation bits per byte against vocabulary size (log scale), one line per tokeniser family,
    with error bars of one standard error across seeds where there are several."""
    families: dict[str, list[tuple[int, float, float]]] = {}
    for result in lm["results"].values():
        families.setdefault(result["family"], []).append(
            (result["vocab_size"], result["valid_bpb"], result["valid_bpb_stderr"] or 0.0))
    figure = _figure()
    axes = figure.add_subplot()
    for name, points in families.items():
        sizes, scores, errors = zip(*sorted(points))
        axes.errorbar(sizes, scores, yerr=errors, marker="o", capsize=3, label=name)
    axes.set_xscale("log", base=2)
    axes.set_xlabel("vocabulary size")
    axes.set_ylabel("validation bits per byte")
    axes.set_title("Language models: validation BpB (lower is better)")
    axes.legend(fontsize="small")
    return _png(figure)


def write_corpus_plots(statistics: Mapping[str, Any], directory: str | os.PathLike) -> list[Path]:
    """Write rank-frequency.png and growth.png into `directory` (created if missing)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, plot in (("rank-frequency.png", plot_rank_frequency), ("growth.png", plot_growth)):
        with atomic_write(directory / name, "wb") as stream:
            stream.write(plot(statistics))
        written.append(directory / name)
    return written


# --------------------------------------------------------------------------- HTML

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; }
td { text-align: right; font-variant-numeric: tabular-nums; } th { text-align: left; }
td.cut { text-align: left; font-family: ui-monospace, monospace; white-space: pre-wrap; }
.token { border-radius: 3px; padding: 0 1px; margin-right: 1px; }
.sample { font-style: italic; }
figure { display: inline-block; margin: 0.5em; } img { max-width: 100%; }
"""

def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in header)
    body = "\n".join(
        "<tr>" + f"<th>{html.escape(str(row[0]))}</th>"
        + "".join(f"<td>{html.escape(format_value(cell))}</td>" for cell in row[1:]) + "</tr>"
        for row in rows
    )
    return f"<table>\n<tr>{head}</tr>\n{body}\n</table>"


def _image(png: bytes, alt: str) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    return f'<figure><img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}"></figure>'


def render_report(report: Mapping[str, Any]) -> str:
    """The report as one HTML page with no external resources."""
    evaluation = report["evaluation"]
    names = list(evaluation)
    metric_keys = list(scalars(next(iter(evaluation.values()))))
    comparison = report["comparison"]
    statistics = report["corpus_stats"]
    texts = comparison["texts"]
    by_pair = {(row["tokenizer"], row["text"]): row for row in comparison["rows"]}

    def per_text(field: str) -> str:
        return _table(["text", *comparison["tokenizers"]],
                      [[text, *(by_pair[(name, text)][field] for name in comparison["tokenizers"])] for text in texts])

    sections = [
        f"<h1>{html.escape(report['title'])}</h1>",
        "<p>Every number is defined in polytok's docs/metrics.md. The same numbers are in the JSON and CSV "
        "files written beside this page.</p>",
        f"<h2>Intrinsic metrics on {html.escape(report['corpus'])}</h2>",
        _table(["metric", *names], [[key, *(evaluation[name].get(key) for name in names)] for key in metric_keys]),
        "<h2>Tokens per word</h2>",
        per_text("tokens_per_word"),
        "<h2>Bytes per token</h2>",
        per_text("bytes_per_token"),
        f"<h2>The tax: cost relative to {html.escape(comparison['reference'])} "
        f"(cost = {html.escape(comparison['cost'])})</h2>",
        per_text("tax"),
        "<p>Gini coefficient of the cost across texts (0 = parity):</p>",
        _table(["tokeniser", "Gini"], [[name, value] for name, value in comparison["gini"].items()]),
        _image(plot_tokens_per_word(comparison), "tokens per word, per text and tokeniser"),
        _image(plot_tax(comparison), "cost relative to the reference text"),
        "<h2>One sentence, cut by each tokeniser</h2>",
        render_html(comparison),
        f"<h2>Corpus statistics of {html.escape(report['corpus'])}</h2>",
        _table(["statistic", "value"], [[key, value] for key, value in scalars(statistics).items()]),
        _image(plot_rank_frequency(statistics), "rank-frequency plot with the Zipf fit"),
        _image(plot_growth(statistics), "vocabulary growth with the Heaps fit"),
    ]
    if "lm" in report:
        results, settings = report["lm"]["results"], report["lm"].get("settings", {})
        fields = ["family", "vocab_size", "valid_bpb", "valid_bpb_stderr", "seeds", "uniform_bpb", "train_bytes"]
        sections += [
            "<h2>Language models: validation bits per byte</h2>",
            f"<p>One GPT per tokeniser and seed (polytok lm-eval; depth {html.escape(str(settings.get('depth', '?')))}, "
            f"{html.escape(format_value(settings.get('budget_bytes')))} training bytes each); docs/lm.md.</p>",
            _table(["tokeniser", *fields], [[name, *(result.get(field) for field in fields)]
                                             for name, result in results.items()]),
            _image(plot_bpb_vocabulary(report["lm"]), "validation bits per byte against vocabulary size"),
        ]
    if "certificates" in report:
        rows = report["certificates"]
        names = list(dict.fromkeys(name for row in rows for name in row["percent_of_bound"]))
        sections += [
            "<h2>Certified lower bounds at each budget</h2>",
            "<p>polytok certify --budgets: the fewest tokens any vocabulary of K tokens beyond the 256 bytes "
            "could cut the corpus into is at least the bound; each tokeniser's count is given as % of it "
            "(the ConvexTok paper's Table 2). " + html.escape(rows[0]["covers"]) + ".</p>",
            _table(["K", "bound", *names, "status"],
                   [[row["budget"], row["bound"],
                     *(None if row["percent_of_bound"].get(name) is None else f"{row['percent_of_bound'][name]:.2f}%"
                       for name in names), row["status"]] for row in rows]),
            _image(plot_gap_vs_budget({row["budget"]: row["percent_of_bound"] for row in rows}),
                   "tokens over the certified bound against the budget"),
        ]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(report['title'])}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(sections)
        + "\n</body>\n</html>\n"
    )


def write_report(report: Mapping[str, Any], path: str | os.PathLike) -> list[Path]:
    """Write the HTML page at `path`, and its numbers as JSON and CSV beside it (same stem);
    each file appears whole or not at all."""
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"report path {path} should end in .html (the .json and .csv go beside it)")
    if not path.parent.is_dir():
        raise ConfigError(f"cannot write {path}: directory {path.parent} does not exist")
    outputs = [path, path.with_suffix(".json"), path.with_suffix(".csv")]
    contents = [
        render_report(report),
        json.dumps(report, indent=2, ensure_ascii=False) + "\n",
        to_csv(report_rows(report), CSV_FIELDS),
    ]
    for output, content in zip(outputs, contents):
        with atomic_write(output) as stream:
            stream.write(content)
    return outputs
