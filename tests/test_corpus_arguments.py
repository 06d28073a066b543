"""Lists of arbitrary str given as a corpus: each call reads the files the list names, or fails at
once with the CorpusError that says to pass texts; it never reads or lists anything else."""
from __future__ import annotations

import builtins
import contextlib
import glob
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import polytok
from polytok.errors import CorpusError

DATA = Path(__file__).parent / "data"
FILES = {
    "a.txt": "alpha beta alpha\n",
    "b.md": "beta gamma\n",
    "d/c.txt": "gamma delta\n",
    "d/e/f.jsonl": '{"text": "delta epsilon"}\n',
}
NAMES = ["a.txt", "b.md", "d", "d/", "./a.txt", "*.txt", "*", "d/**/*.jsonl", "**/*.txt", "d/*", "[ab].*", "?.md"]
# "/" and ".." are left out of the generated texts: they name files outside the tree, which a list
# may do (the names are read as globs), so reading them could not be told from a bug here.
ALPHABET = "ab./*?[]!-d e\n\0"
fragments = st.text(alphabet=ALPHABET, max_size=30)
long_texts = st.builds(lambda piece, times: piece * times, st.text(alphabet=ALPHABET, min_size=1, max_size=12), st.integers(100, 3000))
items = st.one_of(st.sampled_from(NAMES), fragments, long_texts).filter(
    lambda text: not text.startswith("/") and ".." not in text.split("/")
)
ENGLISH = (DATA / "kjv.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A directory holding FILES."""
    root = tmp_path_factory.mktemp("tree")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@contextlib.contextmanager
def recording(opened: list[str], listed: list[str]):
    """Records the paths that builtins.open opens and os.scandir / os.listdir list, as absolute paths."""
    real_open, real_scandir, real_listdir = builtins.open, os.scandir, os.listdir

    def record_open(file, *args, **kwargs):
        if not isinstance(file, int):
            opened.append(os.path.realpath(file))
        return real_open(file, *args, **kwargs)

    def record_scandir(path="."):
        listed.append(os.path.realpath(path))
        return real_scandir(path)

    def record_listdir(path="."):
        listed.append(os.path.realpath(path))
        return real_listdir(path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(builtins, "open", record_open)
        patch.setattr(os, "scandir", record_scandir)
        patch.setattr(os, "listdir", record_listdir)
        yield


def named_files(names: list[str]) -> set[str]:
    """Every file under what `names` names as paths, directories and globs (the README's rule)."""
    found = set()
    for name in names:
        for match in glob.glob(name, recursive=True) if glob.has_magic(name) else [name]:
            if os.path.isdir(match):
                found.update(os.path.realpath(os.path.join(root, file)) for root, _, files in os.walk(match) for file in files)
            else:
                found.add(os.path.realpath(match))
    return found


def check_call(call, names: list[str], root: Path) -> None:
    """`call` on `names` reads only named files, or raises the CorpusError that names texts()
    having opened nothing; either within a second, listing nothing outside `root`."""
    opened: list[str] = []
    listed: list[str] = []
    start = time.perf_counter()
    with recording(opened, listed):
        try:
            call(names)
            failed = None
        except CorpusError as error:
            failed = error
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, f"{elapsed:.2f} s"
    assert all(path == str(root) or path.startswith(str(root) + os.sep) for path in listed), listed
    if failed is not None:
        assert "polytok.texts(" in str(failed)
        assert opened == []
    else:
        assert opened and set(opened) <= named_files(names), (opened, names)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(items, min_size=1, max_size=4))
@example(names=["and/or *" * 3000])
@example(names=["a.txt", ENGLISH * 50])
@example(names=["*/" * 2000 + "a.txt"])
@example(names=["a.txt", "d/**/*.jsonl"])
def test_count_and_train_read_named_files_or_refuse_the_list(tree, names):
    root = Path(os.path.realpath(tree))
    with contextlib.chdir(root):
        check_call(lambda corpus: polytok.count(corpus, pattern="gpt2", progress=False), names, root)
        check_call(
            lambda corpus: polytok.train(corpus, algorithm="bpe", vocab_size=260, pattern="gpt2", progress=False),
            names,
            root,
        )


def test_a_text_that_cannot_be_a_path_is_refused_with_the_reason(tree):
    with contextlib.chdir(tree):
        for text, reason in [
            ("and/or *" * 3000, r"24000 bytes; a path has at most \d+"),
            ("", "it is empty"),
            ("two\nlines", "it holds a newline"),
            ("a\0b", "it holds a NUL"),
            ("x" * 300, r"a part of 300 bytes; a file name has at most \d+"),
            ("\ud800", "it is not encodable as a file name"),
        ]:
            with pytest.raises(CorpusError, match=rf"corpus item 1 .* cannot be a file name \({reason}\).*polytok\.texts"):
                polytok.count(["a.txt", text], progress=False)
            with pytest.raises(CorpusError, match=rf"cannot be a file name \({reason}\).*polytok\.texts"):
                polytok.count(text, progress=False)


def test_a_glob_is_searched_only_below_an_existing_directory(tree):
    with contextlib.chdir(tree):
        with pytest.raises(CorpusError, match=r"no files match 'and/or \*' \(no directory 'and'\)"):
            polytok.count("and/or *", progress=False)
        with pytest.raises(CorpusError, match=r"reaches 65 names below '\.'; a glob reaches at most 64"):
            polytok.count("*/" * 64 + "a.txt", progress=False)
        # Within the limit the glob is searched (and matches nothing here).
        with pytest.raises(CorpusError, match=r"no files match '(\*/){63}a\.txt'$"):
            polytok.count("*/" * 63 + "a.txt", progress=False)
    # An absolute glob, and one whose prefix is a directory deep down, are searched.
    counts = polytok.count([str(tree / "**" / "*.jsonl"), str(tree / "d" / "e" / "f*")], pattern="gpt2", progress=False)
    assert counts.to_dict()[b" epsilon"] == 2
