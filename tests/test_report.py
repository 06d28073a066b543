"""polytok.report: the HTML report of two tokenisers on two languages, its JSON and CSV twins,
atomic and deterministic output, and a render in headless Chromium in which every plot loads."""
from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import polytok
from polytok.errors import ConfigError
from polytok.report import add_report_arguments, build_report, report_rows, run_report, write_report
from test_metrics import COMMON_WORDS, GreedyTokenizer, small_tiktoken  # noqa: F401

DATA = Path(__file__).parent / "data"
TEXTS = {
    "en": (DATA / "handbook-en-US.txt").read_text(encoding="utf-8"),
    "es": (DATA / "handbook-es-ES.txt").read_text(encoding="utf-8"),
}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report():
    tokenizers = {"words": GreedyTokenizer([w.encode() for w in COMMON_WORDS]), "tiktoken": small_tiktoken()}
    return build_report(tokenizers, TEXTS, title="Handbook, en and es")


def test_report_numbers(report):
    assert list(report["evaluation"]) == ["words", "tiktoken"]
    encoding = small_tiktoken()
    both = list(TEXTS.values())
    assert report["evaluation"]["tiktoken"]["tokens"] == sum(len(encoding.encode_ordinary(text)) for text in both)
    assert report["corpus_stats"]["words"] == sum(len(text.split()) for text in both)
    assert report["comparison"]["texts"] == ["en", "es"]
    rows = report_rows(report)
    sections = {row["section"] for row in rows}
    assert sections == {"evaluation", "comparison", "gini", "corpus_stats"}
    taxes = [row for row in rows if row["metric"] == "tax" and row["text"] == "en"]
    assert [row["value"] for row in taxes] == [1.0, 1.0]


@pytest.fixture(scope="module")
def written(report, tmp_path_factory):
    """The report written once, for the tests that read the files."""
    return write_report(report, tmp_path_factory.mktemp("report") / "report.html")


def _images(page: str) -> list[bytes]:
    return [base64.b64decode(data) for data in re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def test_written_files_hold_the_same_numbers(report, written):
    assert [path.name for path in written] == ["report.html", "report.json", "report.csv"]
    tmp_path = written[0].parent
    assert sorted(path.name for path in tmp_path.iterdir()) == ["report.csv", "report.html", "report.json"]
    assert json.loads((tmp_path / "report.json").read_text(encoding="utf-8")) == json.loads(json.dumps(report))
    rows = list(csv.DictReader(io.StringIO((tmp_path / "report.csv").read_text(encoding="utf-8"))))
    expected = report_rows(report)
    assert len(rows) == len(expected)
    for row, wanted in zip(rows, expected):
        assert (row["section"], row["tokenizer"], row["metric"]) == (wanted["section"], wanted.get("tokenizer", ""), wanted["metric"])
        value = wanted["value"]
        assert row["value"] == ("" if value is None else str(value))
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    images = _images(page)
    assert len(images) == 4 and all(image.startswith(PNG_SIGNATURE) for image in images)
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")  # self-contained
    assert "Handbook, en and es" in page and "class=\"token\"" in page


def test_output_is_deterministic(report, written, tmp_path):
    again = write_report(report, tmp_path / "report.html")
    for first, second in zip(written, again):
        assert first.read_bytes() == second.read_bytes()


def test_a_failed_write_leaves_no_file(report, tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="does not exist"):
        write_report(report, tmp_path / "missing" / "report.html")
    with pytest.raises(ConfigError, match="should end in .html"):
        write_report(report, tmp_path / "report.pdf")
    broken = dict(report, comparison=dict(report["comparison"], rows=None))
    with pytest.raises(TypeError):
        write_report(broken, tmp_path / "report.html")
    assert list(tmp_path.iterdir()) == []


def test_cli_report(tmp_path, monkeypatch):
    words = GreedyTokenizer([w.encode() for w in COMMON_WORDS])
    monkeypatch.setattr(polytok.formats, "load",
                        lambda path, **options: words if Path(path).stem == "words" else GreedyTokenizer())
    for name in ("words", "bytes"):
        (tmp_path / f"{name}.json").write_text('{"format": "polytok"}')
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    run_report(parser.parse_args([
        str(tmp_path / "words.json"), str(tmp_path / "bytes.json"),
        "--text", str(DATA / "handbook-en-US.txt"), str(DATA / "handbook-es-ES.txt"),
        "--corpus", str(DATA / "kjv.txt"), "-o", str(tmp_path / "out.html"),
    ]))
    numbers = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    kjv = (DATA / "kjv.txt").read_text(encoding="utf-8")
    assert numbers["evaluation"]["bytes"]["tokens"] == len(kjv.encode("utf-8"))
    assert numbers["corpus_stats"]["words"] == len(kjv.split())
    assert numbers["comparison"]["reference"] == "handbook-en-US"
    assert len(_images((tmp_path / "out.html").read_text(encoding="utf-8"))) == 4


# A probe appended to a copy of the page: once everything has loaded it writes, into the DOM,
# how many images there are and how many decoded to a picture.
PROBE = """<script>
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var loaded = images.filter(function (image) { return image.complete && image.naturalWidth > 0; });
  var marker = document.createElement("div");
  marker.id = "image-check";
  marker.setAttribute("data-total", String(images.length));
  marker.setAttribute("data-loaded", String(loaded.length));
  document.body.appendChild(marker);
});
</script>"""


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed: `apt-get install chromium` (Debian); the Makefile and CI must install it",
)
def test_report_renders_in_headless_chromium_with_every_plot_loaded(written, tmp_path):
    page = written[0].read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "\n</body>"), encoding="utf-8")
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000"]
    dom = subprocess.run([*flags, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    marker = re.search(r'<div id="image-check" data-total="(\d+)" data-loaded="(\d+)"', dom.stdout)
    assert marker, f"the probe did not run; chromium said: {dom.stderr[-2000:]}"
    assert marker.groups() == ("4", "4")

    screenshot = tmp_path / "screenshot.png"
    subprocess.run([*flags, f"--screenshot={screenshot}", "--window-size=1200,1600", written[0].as_uri()],
                   capture_output=True, timeout=120)
    from matplotlib import image

    pixels = image.imread(screenshot)
    assert pixels.shape[:2] == (1600, 1200)
    # A rendered page, not a blank one: many distinct colours (text, tables, token highlights).
    assert len({tuple(pixel) for pixel in pixels[::8, ::8].reshape(-1, pixels.shape[2]).round(2).tolist()}) > 20
