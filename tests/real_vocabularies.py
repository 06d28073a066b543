"""The real OpenAI vocabularies (cl100k_base, o200k_base) for tests, offline.

The `bpe-openai` wheel (test extra) ships both rank files gzipped in its `data/` folder. They are
unpacked, checked against the SHA-256 that tiktoken itself checks, and laid out as tiktoken's
download cache (file name = sha1 of the URL), so `tiktoken.get_encoding` works without a network.
"""
from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
from contextlib import contextmanager
from pathlib import Path

import polytok
from polytok.tokenizer import Tokenizer

# tiktoken_ext/openai_public.py checks these hashes of the (unzipped) rank files.
SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
# The polytok preset that splits as each encoding's pattern does.
PRESET = {"cl100k_base": "cl100k", "o200k_base": "o200k"}
URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


def packaged_rank_files() -> Path | None:
    """The `data/` folder of the installed bpe-openai wheel, or None if it is not installed."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "data"


def unpack(directory: Path) -> dict[str, Path]:
    """Unzips both rank files into `directory` and copies them into `directory/cache` under
    tiktoken's cache names; returns name -> rank file. Raises if a hash differs."""
    data = packaged_rank_files()
    if data is None:
        raise FileNotFoundError("bpe-openai is not installed; its wheel carries the rank files")
    (directory / "cache").mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, digest in SHA256.items():
        raw = gzip.decompress((data / f"{name}.tiktoken.gz").read_bytes())
        actual = hashlib.sha256(raw).hexdigest()
        if actual != digest:
            raise ValueError(f"{name} from bpe-openai has SHA-256 {actual}, not tiktoken's {digest}")
        paths[name] = directory / f"{name}.tiktoken"
        paths[name].write_bytes(raw)
        cache_name = hashlib.sha1(URL.format(name=name).encode()).hexdigest()
        (directory / "cache" / cache_name).write_bytes(raw)
    return paths


@contextmanager
def offline_tiktoken(directory: Path):
    """tiktoken reads its rank files from `directory/cache` while the block runs."""
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(directory / "cache")
    try:
        yield
    finally:
        if previous is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = previous


def load_pair(name: str, directory: Path) -> tuple[Tokenizer, object]:
    """polytok's tokeniser (load_tiktoken with the preset pattern and tiktoken's special tokens)
    and `tiktoken.get_encoding(name)`, both from the rank files unpacked in `directory`."""
    import tiktoken

    with offline_tiktoken(directory):
        encoding = tiktoken.get_encoding(name)
    ours = polytok.load_tiktoken(directory / f"{name}.tiktoken", pattern=PRESET[name], special_tokens=encoding._special_tokens)
    return ours, encoding
