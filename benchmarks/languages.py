"""Per-language benchmark text from installed Debian packages, split into a tuning and a
reporting half: what `bench_encode.py --per-language` (and any benchmark that must be measured
on text nobody tuned on) reads.

    apt-get install libreoffice-help-* debian-handbook manpages-{ja,ru,uk,el,zh,vi,mk,sr,de,fr,pl,tr,cs,hu}
    python benchmarks/languages.py [--mb 2]       # builds benchmarks/out/languages/, prints the table

Sources (their packages' licences): LibreOffice help pages (MPL-2.0, 34 languages, among them
Devanagari, Khmer, Tibetan, Hangul, kana, both Chinese scripts, Greek, Cyrillic), the Debian
Administrator's Handbook (GPL-2.0+ or CC-BY-SA-3.0; 26 languages with Arabic and Persian,
right to left), manual pages (troff markup stripped) and source code on this machine (Python's
standard library, C headers, the Rust crates in cargo's registry). One page, chapter or source
file is one document. A document goes to the tuning or the reporting half by the SHA-256 of its
path, so the halves do not depend on which other packages are installed; each half of a
language is capped at `--mb` megabytes, taking documents from its sources in turn, each source's
in the order of that hash. Many help pages of the smaller languages are untranslated English or
Basic code: in a language whose script is not Latin, a document is kept only when a third of its
letters are outside ASCII.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import html.parser
import re
import sys
from collections.abc import Iterator
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "languages"
SEPARATOR = "\n\f\n"  # between documents in a cached half (no document holds a form feed)
HALVES = ("tune", "report")
HELP = Path("/usr/share/libreoffice/help")
HANDBOOK = Path("/usr/share/doc/debian-handbook/html")
MAN = Path("/usr/share/man")
# language -> script, for the table (the languages these packages hold)
SCRIPTS = {
    "ar": "Arabic", "fa": "Arabic", "hi": "Devanagari", "km": "Khmer", "dz": "Tibetan", "ja": "Japanese",
    "ko": "Hangul", "zh-CN": "Han (simplified)", "zh-TW": "Han (traditional)", "el": "Greek", "ru": "Cyrillic",
    "uk": "Cyrillic", "mk": "Cyrillic", "sr": "Cyrillic", "om": "Latin", "code-python": "code", "code-c": "code",
    "code-rust": "code",
}


class _Text(html.parser.HTMLParser):
    """The text of an HTML page, a newline at each block element, scripts and styles left out."""

    BLOCK = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "tr", "td", "table", "ul", "ol"}

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("script", "style", "head"):
            self.skip += 1
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head"):
            self.skip = max(0, self.skip - 1)
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def html_text(path: Path) -> str:
    parser = _Text()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    text = re.sub(r"[ \t]+\n", "\n", "".join(parser.parts))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


_TROFF_ESCAPE = re.compile(r"\\f(?:\[[^\]]*\]|\(..|.)|\\\(..|\\\[[^\]]*\]|\\[&|^%c]|\\s[+-]?\d")


def man_text(path: Path) -> str:
    """A manual page's text: comments and request names dropped, font and size escapes removed."""
    lines = []
    for line in gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace").splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        if line.startswith((".", "'")):
            request = line[1:].split(None, 1)
            line = request[1] if len(request) > 1 else ""
        line = _TROFF_ESCAPE.sub("", line).replace("\\-", "-").replace("\\e", "\\").replace('"', "")
        lines.append(line)
    return "\n".join(lines).strip()


READERS = {"html": html_text, "man": man_text, "text": lambda path: path.read_text(encoding="utf-8")}


def _language(code: str) -> str:
    """One name for a language across the packages: ja-JP, ja -> ja; zh_CN, zh-CN -> zh-CN."""
    code = code.replace("_", "-")
    if code.lower().startswith("zh"):
        return "zh-TW" if code.upper().endswith("TW") else "zh-CN"
    if code in ("en-GB", "en-US", "pt-BR", "ca-valencia"):
        return code
    return code.split("-")[0]


def sources() -> dict[str, list[tuple[list[Path], str]]]:
    """language -> its sources, each (its documents, in the order of their paths' hashes; reader)."""
    found: dict[str, list[tuple[list[Path], str]]] = {}

    def add(language: str, paths: Iterator[Path], reader: str) -> None:
        ordered = sorted(paths, key=_digest)
        if ordered:
            found.setdefault(language, []).append((ordered, reader))

    if HELP.is_dir():
        for folder in sorted(path for path in HELP.iterdir() if path.is_dir() and path.name != "media"):
            add(_language(folder.name), folder.rglob("*.html"), "html")
    if HANDBOOK.is_dir():
        for folder in sorted(path for path in HANDBOOK.iterdir() if path.is_dir()):
            add(_language(folder.name), folder.glob("*.html"), "html")
    if MAN.is_dir():
        for folder in sorted(path for path in MAN.iterdir() if path.is_dir() and not path.name.startswith("man")):
            add(_language(folder.name), folder.glob("man*/*.gz"), "man")
    library = Path(sys.base_prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    add("code-python", library.rglob("*.py"), "text")
    add("code-c", Path("/usr/include").rglob("*.h"), "text")
    add("code-rust", Path.home().glob(".cargo/registry/src/*/*/src/**/*.rs"), "text")
    return found


def _digest(path: Path) -> bytes:
    return hashlib.sha256(str(path).encode()).digest()


def half_of(path: Path) -> str:
    """The half a document belongs to, by its path alone."""
    return HALVES[_digest(path)[0] & 1]


def _in_its_script(language: str, text: str) -> bool:
    """Whether `text` is written in its language's script: always for Latin-script languages and
    code; elsewhere, when at least a third of its letters are outside ASCII."""
    if SCRIPTS.get(language, "Latin") in ("Latin", "code"):
        return True
    letters = [character for character in text if character.isalpha()]
    return sum(not character.isascii() for character in letters) * 3 > len(letters)


def _in_turn(lists: list[list[Path]]) -> Iterator[tuple[int, Path]]:
    """(which list, path): the first of each list, then the second of each, and so on."""
    for position in range(max(map(len, lists))):
        for index, paths in enumerate(lists):
            if position < len(paths):
                yield index, paths[position]


def build(megabytes: float) -> dict[str, dict[str, Path]]:
    """Writes each language's halves (at most `megabytes` MB each) under OUT once; language ->
    half -> file. A language is kept only when both halves have at least 20 kB."""
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = OUT / f"built-{megabytes:g}MB"
    if not stamp.exists():
        budget = int(megabytes * 1e6)
        texts: dict[tuple[str, str], list[str]] = {}
        sizes: dict[tuple[str, str], int] = {}
        for language, languages_sources in sources().items():
            readers = [reader for _, reader in languages_sources]
            for index, path in _in_turn([paths for paths, _ in languages_sources]):
                key = (language, half_of(path))
                if sizes.get(key, 0) >= budget:
                    if all(sizes.get((language, half), 0) >= budget for half in HALVES):
                        break
                    continue
                try:
                    text = READERS[readers[index]](path)
                except (UnicodeDecodeError, OSError, EOFError):
                    continue
                text = text.replace("\f", " ")
                if len(text) < 200 or not _in_its_script(language, text):
                    continue
                texts.setdefault(key, []).append(text)
                sizes[key] = sizes.get(key, 0) + len(text.encode("utf-8"))
        for old in OUT.glob("*.txt"):
            old.unlink()
        for (language, half), documents in texts.items():
            if all(sizes.get((language, other), 0) >= 20_000 for other in HALVES):
                (OUT / f"{language}.{half}.txt").write_text(SEPARATOR.join(documents), encoding="utf-8")
        for old in OUT.glob("built-*"):
            old.unlink()
        stamp.touch()
    found: dict[str, dict[str, Path]] = {}
    for path in sorted(OUT.glob("*.txt")):
        language, half, _ = path.name.rsplit(".", 2)
        found.setdefault(language, {})[half] = path
    return found


def documents(path: Path) -> list[str]:
    """The documents of one cached half."""
    return path.read_text(encoding="utf-8").split(SEPARATOR)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=2.0, help="cap on each half of each language, in MB")
    args = parser.parse_args()
    halves = build(args.mb)
    print(f"{'language':<12} {'script':<18} {'tune MB':>8} {'report MB':>9} {'report docs':>11}")
    for language, files in halves.items():
        print(f"{language:<12} {SCRIPTS.get(language, 'Latin'):<18} {files['tune'].stat().st_size / 1e6:8.2f} "
              f"{files['report'].stat().st_size / 1e6:9.2f} {len(documents(files['report'])):11}")


if __name__ == "__main__":
    main()
