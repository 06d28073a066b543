"""Names of corpus files: which strings can be file names at all, globs kept from walking the
filesystem, and the expansion of a path, directory or glob to a sorted list of files. A text is
never read as a name (see corpus.py's docstring)."""
from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from polytok.errors import CorpusError

#: File suffixes a directory is searched for (each also with .gz or .zst appended).
TEXT_SUFFIXES = (".txt", ".text", ".md", ".rst", ".jsonl", ".parquet")
COMPRESSED_SUFFIXES = (".gz", ".zst")
#: The most names a glob reaches below the directory before its first metacharacter (deeper ones
#: match nothing, unsearched): "corpus/**/*.txt" reaches 2.
GLOB_MAX_DEPTH = 64


def shown_name(text: str) -> str:
    """`text` as an error message quotes it: its first 40 characters."""
    return text if len(text) <= 40 else text[:40] + "..."


def _name_limits() -> tuple[int, int]:
    """The most bytes a path and one of its components may have (PC_PATH_MAX counts the final NUL),
    as the file system of the working directory says; 4096 and 255 where it does not say."""
    limits = []
    for name, fallback in (("PC_PATH_MAX", 4096), ("PC_NAME_MAX", 255)):
        try:
            limit = os.pathconf(os.curdir, name)
        except (AttributeError, ValueError, OSError):  # no pathconf (Windows), or no such limit
            limit = -1
        limits.append(limit if limit > 0 else fallback)
    return limits[0] - 1, limits[1]


def unusable_name(text: str) -> str | None:
    """Why `text` cannot name a file (empty, a newline or NUL, not encodable, longer than the
    system's limits); None if it can."""
    if not text:
        return "it is empty"  # Path("") would be the working directory
    if "\n" in text or "\0" in text:
        return "it holds a " + ("newline" if "\n" in text else "NUL")
    try:
        encoded = os.fsencode(text)
    except UnicodeEncodeError:
        return "it is not encodable as a file name"
    path_max, name_max = _name_limits()
    if len(encoded) > path_max:
        return f"{len(encoded)} bytes; a path has at most {path_max}"
    separators = re.escape(os.fsencode(os.sep + (os.altsep or "")))
    longest = max(map(len, re.split(b"[" + separators + b"]", encoded)))
    if longest > name_max:
        return f"a part of {longest} bytes; a file name has at most {name_max}"
    return None


def _glob_refusal(pattern: str) -> str | None:
    """Why the glob `pattern` is not globbed (see `expand_paths`); None if it is."""
    prefix = pattern[: re.search(r"[*?[]", pattern).start()]
    base = os.path.dirname(prefix)
    if not os.path.isdir(base or os.curdir):
        return f"no directory {base!r}"
    depth = len(Path(pattern[len(base):].lstrip(os.sep + (os.altsep or ""))).parts)
    if depth > GLOB_MAX_DEPTH:
        return f"it reaches {depth} names below {base or os.curdir!r}; a glob reaches at most {GLOB_MAX_DEPTH}"
    return None


def expand_paths(spec: str | os.PathLike[str]) -> list[Path]:
    """The files a path, directory or glob names, in sorted order; CorpusError if there are none.

    A name that cannot be a path (see `unusable_name`) is refused before anything is looked up. A
    glob is searched only where the directory before its first metacharacter exists, and reaches
    at most GLOB_MAX_DEPTH names below it; else it matches nothing, so that text is never globbed.
    """
    text = os.fspath(spec)
    reason = unusable_name(text)
    if reason:
        hint = "; to use a string as a text, pass polytok.texts([...])" if isinstance(spec, str) else ""
        raise CorpusError(f"{shown_name(text)!r} cannot be a file name ({reason}){hint}")
    if glob.has_magic(text):
        refusal = _glob_refusal(text)
        if refusal:
            raise CorpusError(f"no files match {shown_name(text)!r} ({refusal})")
        files = []
        for match in sorted(glob.glob(text, recursive=True)):
            files.extend(_text_files_under(Path(match)) if os.path.isdir(match) else [Path(match)])
        if not files:
            raise CorpusError(f"no files match {text!r}")
        return files
    path = Path(text)
    # os.path's tests, unlike Path's, read a name the system refuses (too long, a NUL) as missing.
    if os.path.isdir(path):
        files = _text_files_under(path)
        if not files:
            suffixes = " ".join(TEXT_SUFFIXES)
            raise CorpusError(
                f"directory {text!r} holds no text files (looked for {suffixes}, optionally .gz/.zst); "
                "name other files directly or with a glob"
            )
        return files
    if not os.path.exists(path):
        raise CorpusError(f"no such file or directory: {text!r}")
    return [path]


def _text_files_under(directory: Path) -> list[Path]:
    """Corpus files under `directory`, recursively, sorted, skipping hidden files and directories."""
    found = []
    for root, directories, files in os.walk(directory):
        directories[:] = sorted(name for name in directories if not name.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and base_suffix(name) in TEXT_SUFFIXES:
                found.append(Path(root) / name)
    return found


def base_suffix(name: str) -> str:
    """The suffix that says a file's format, under any compression suffix: data.jsonl.zst -> .jsonl."""
    stem, suffix = os.path.splitext(name.lower())
    if suffix in COMPRESSED_SUFFIXES:
        suffix = os.path.splitext(stem)[1]
    return suffix
