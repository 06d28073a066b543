"""A bound for every vocabulary size from one run: a BPE merge list certified at each of its
prefixes (equal to certifying each prefix alone, monotone in K, below every count), ConvexTok
trained at several sizes at once, and the Table 2 the command line prints."""
import json

import pytest

import polytok
from polytok.certify import Certificate, certify, certify_table, prefix_tokenizers
from polytok.cli import main
from polytok.errors import ConfigError
from polytok.lp.bound import shortest_path_tokens
from polytok.lp.dual import dual_ascent_budgets
from polytok.lp.graph import TokenisationGraph
from polytok.lp.solvers import solve
from test_bound import excerpt_counts

BUDGETS = [12, 40, 90]


@pytest.fixture(scope="module")
def counts():
    return excerpt_counts(2500)


@pytest.fixture(scope="module")
def bpe(counts):
    return polytok.train(counts, vocab_size=256 + max(BUDGETS), progress=False)


def test_prefix_tokenizers_are_the_first_merges(bpe, counts):
    for budget, prefix in prefix_tokenizers(bpe, [5, 90]):
        assert prefix.vocab == bpe.vocab[: 256 + budget]
        assert prefix.merges == bpe.merges[:budget]
    alone = polytok.train(counts, vocab_size=256 + 5, progress=False)
    (_, five), = prefix_tokenizers(bpe, [5])
    text = "the configuration of the system"
    assert five.encode(text) == alone.encode(text)
    with pytest.raises(ConfigError, match="from 1 to the 90 merges"):
        prefix_tokenizers(bpe, [91])
    with pytest.raises(ConfigError, match="no merges"):
        certify(polytok.train(counts, algorithm="convex", vocab_size=266, solver="highs", progress=False), counts,
                budgets=[3])


@pytest.mark.parametrize("solver", ["highs", "dual"])
def test_each_budget_matches_certifying_its_prefix_alone(bpe, counts, solver):
    certificates = certify(bpe, counts, budgets=BUDGETS, solver=solver)
    graph = TokenisationGraph(counts)
    for (budget, prefix), certificate in zip(prefix_tokenizers(bpe, BUDGETS), certificates):
        alone = certify(prefix, counts, solver=solver)
        assert certificate.budget == alone.budget == budget
        assert certificate.tokens == alone.tokens and certificate.shortest_path_tokens == alone.shortest_path_tokens
        # Raised by the other budgets' prices: never lower than alone, and close to it.
        assert certificate.bound >= alone.bound * (1 - 1e-9)
        assert certificate.bound == pytest.approx(alone.bound, rel=2e-3)
        optimum = solve(graph.linear_program(budget), "highs").objective
        assert certificate.bound <= optimum + 1e-6
        assert certificate.bound <= certificate.shortest_path_tokens <= certificate.tokens


def test_bounds_are_monotone_and_below_every_count(bpe, counts):
    budgets = [90, 3, 25, 60, 8]  # any order; each certificate stays with its budget
    rows = certify_table(bpe, counts, budgets, solver="dual")
    assert [row.certificate.budget for row in rows] == budgets
    by_budget = sorted(rows, key=lambda row: row.certificate.budget)
    bounds = [row.certificate.bound for row in by_budget]
    assert all(later <= earlier for earlier, later in zip(bounds, bounds[1:]))
    for row in rows:
        assert row.certificate.bound <= row.certificate.tokens
        assert set(row.roundings) == {"det", "bias", "int"}
        assert all(row.certificate.bound <= count for count in row.roundings.values())
        assert row.percentages()["BPE"] >= 100.0


def test_warm_started_ascent_reaches_the_cold_bound(counts):
    graph = TokenisationGraph(counts)
    warm = list(dual_ascent_budgets(graph, [20, 40], warm_start=True))
    cold = list(dual_ascent_budgets(graph, [40]))
    assert warm[1][0].status == cold[0][0].status == "STAGES_DONE"
    assert [stage["temperature"] for stage in warm[1][2]] == [stage["temperature"] for stage in cold[0][2]]
    assert warm[1][0].objective == pytest.approx(cold[0][0].objective, rel=1e-3)
    # It did start elsewhere: the first budget's prices.
    assert warm[1][0].duals.tolist() != cold[0][0].duals.tolist()


def test_convex_at_several_sizes_from_one_run(counts):
    sizes = [256 + 16, 256 + 48]
    tokenizers = polytok.train(counts, algorithm="convex", vocab_size=sizes, solver="dual", progress=False)
    assert [t.vocab_size for t in tokenizers] == sizes
    for tokenizer, size in zip(tokenizers, sizes):
        certificate = Certificate.from_dict(tokenizer.certificate)
        assert certificate.budget == size - 256
        assert certificate.bound <= certificate.tokens
        assert certificate.tokens == shortest_path_tokens(tokenizer.vocab, counts)
    alone = polytok.train(counts, algorithm="convex", vocab_size=sizes[0], solver="dual", progress=False)
    assert alone.vocab == tokenizers[0].vocab  # the first size runs exactly as alone
    with pytest.raises(ConfigError, match="algorithm='convex'"):
        polytok.train(counts, vocab_size=sizes, progress=False)


def test_report_shows_the_certificates_of_certify_budgets(bpe, tmp_path, capsys):
    """`polytok report --certificates` takes `polytok certify --budgets --json` as printed: its
    table holds each budget's bound and counts as % of it, its CSV the same numbers, and the
    page one more plot (gap against K) than without; a file of another shape is refused."""
    tokenizer_file = tmp_path / "bpe.json"
    bpe.save(tokenizer_file)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(open("tests/data/handbook-en-US.txt", encoding="utf-8").read()[:2500], encoding="utf-8")
    assert main(["-q", "certify", "-t", str(tokenizer_file), str(corpus), "--solver", "dual",
                 "--budgets", "12,40", "--json"]) == 0
    table = tmp_path / "table.json"
    table.write_text(capsys.readouterr().out, encoding="utf-8")
    rows = json.loads(table.read_text())
    page, plain = tmp_path / "report.html", tmp_path / "plain.html"
    assert main(["-q", "report", str(tokenizer_file), "--text", str(corpus), "-o", str(plain)]) == 0
    assert main(["-q", "report", str(tokenizer_file), "--text", str(corpus), "--certificates", str(table),
                 "-o", str(page)]) == 0
    html, html_plain = page.read_text(), plain.read_text()
    assert "Certified lower bounds at each budget" in html and "Certified lower bounds" not in html_plain
    assert html.count("<img ") == html_plain.count("<img ") + 1
    written = json.loads(page.with_suffix(".json").read_text())["certificates"]
    assert [row["budget"] for row in written] == [12, 40]
    for row, source in zip(written, rows):
        bound = source["certificate"]["bound"]
        assert row["bound"] == bound
        assert row["percent_of_bound"]["BPE"] == 100.0 * source["certificate"]["tokens"] / bound
        assert row["percent_of_bound"]["Det"] == 100.0 * source["roundings"]["det"] / bound
        assert f"{row['percent_of_bound']['Det']:.2f}%" in html
    csv_rows = page.with_suffix(".csv").read_text().splitlines()
    assert sum(line.startswith("certificates,") for line in csv_rows) == 2 * (1 + len(written[0]["percent_of_bound"]))
    del rows[0]["roundings"]
    table.write_text(json.dumps(rows), encoding="utf-8")
    assert main(["-q", "report", str(tokenizer_file), "--text", str(corpus), "--certificates", str(table),
                 "-o", str(tmp_path / "bad.html")]) == 2
    assert "certificates entry 0" in capsys.readouterr().err
    assert not (tmp_path / "bad.html").exists()


def test_command_line_prints_table_two(bpe, counts, tmp_path, capsys):
    tokenizer_file = tmp_path / "bpe.json"
    bpe.save(tokenizer_file)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(open("tests/data/handbook-en-US.txt", encoding="utf-8").read()[:2500], encoding="utf-8")
    assert main(["-q", "certify", "-t", str(tokenizer_file), str(corpus), "--solver", "dual",
                 "--budgets", "12,40"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["K", "bound", "BPE", "Det", "Bias", "Int", "status"]
    assert [line.split()[0] for line in lines[1:]] == ["12", "40"]
    assert all(cell.endswith("%") for line in lines[1:] for cell in line.split()[2:6])
    assert main(["-q", "certify", "-t", str(tokenizer_file), str(corpus), "--solver", "dual",
                 "--budgets", "12,40", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["certificate"]["budget"] for row in rows] == [12, 40]
    plot = tmp_path / "gap.png"
    assert main(["-q", "certify", "-t", str(tokenizer_file), str(corpus), "--solver", "dual",
                 "--budgets", "12,40", "--plot", str(plot)]) == 0
    assert plot.read_bytes().startswith(b"\x89PNG")
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["-q", "certify", "-t", str(tokenizer_file), str(corpus), "--budgets", "12,x"])
    output = tmp_path / "convex-{vocab_size}.json"
    assert main(["-q", "train", str(corpus), "-a", "convex", "--solver", "dual", "-v", "272,290",
                 "-o", str(output)]) == 0
    assert polytok.load(tmp_path / "convex-272.json").vocab_size == 272
    assert polytok.load(tmp_path / "convex-290.json").vocab_size == 290
    assert main(["-q", "train", str(corpus), "-a", "convex", "-v", "272,290", "-o", str(tmp_path / "x.json")]) != 0
