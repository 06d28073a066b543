"""Mutated tokeniser files of every format never take the process down: each mutant, drawn by
hypothesis and made by benchmarks/fuzz_files.py's mutators, is loaded and used in a worker process
under an address-space limit, and loads, or is refused with a polytok.Error; no other exception,
no abort, no hang. The seeds are small real files: polytok JSON trained here, the committed HF
and SentencePiece fixtures (tests/data/readers), the first ranks of cl100k and o200k, a counts
file. The full run (100,000 mutants a format) is `python benchmarks/fuzz_files.py`."""
from __future__ import annotations

import json
import struct
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polytok

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS.parent / "benchmarks"))
sys.path.insert(0, str(TESTS))
import fuzz_files  # noqa: E402
from fuzz_files import Seed  # noqa: E402
from real_vocabularies import packaged_rank_files  # noqa: E402

READERS = TESTS / "data" / "readers"
MUTANTS_PER_FORMAT = 300
TIMEOUT_SECONDS = 10.0
MEMORY_GB = 3.0
HF_FIXTURES = {"hf-bpe": ["hf-bpe-byte-level.json", "hf-bpe-byte-level-nfc.json", "hf-bpe-llama.json"],
               "hf-wordpiece": ["hf-wordpiece.json"], "hf-unigram": ["hf-unigram.json"],
               "sp-bpe": ["sp-bpe-bytes.model"], "sp-unigram": ["sp-unigram.model"]}


def write_seeds(directory: Path) -> list[Seed]:
    """Small seeds of every format in `directory`, with the manifest the worker reads."""
    lines = fuzz_files.training_lines()[:600]
    counts = polytok.count(polytok.texts(lines), special_tokens=fuzz_files.SPECIALS)
    counts.save(directory / "counts.ptc")
    seeds = [Seed("counts", "counts.ptc")]
    for algorithm, size in (("bpe", 320), ("wordpiece", 560), ("unigram", 320)):
        tokenizer = polytok.train(counts, algorithm=algorithm, vocab_size=size, special_tokens=fuzz_files.SPECIALS, progress=False)
        tokenizer.save(directory / f"{algorithm}.json")
        seeds.append(Seed("polytok", f"{algorithm}.json"))
    for kind, names in HF_FIXTURES.items():
        for name in names:
            (directory / name).write_bytes((READERS / name).read_bytes())
            seeds.append(Seed(kind, name))
    data = packaged_rank_files()
    if data is not None and (data / "cl100k_base.tiktoken.gz").exists():
        import gzip

        for name, specials in fuzz_files.TIKTOKEN_SPECIALS.items():
            lines_of_ranks = gzip.decompress((data / f"{name}.tiktoken.gz").read_bytes()).splitlines(keepends=True)
            (directory / f"{name}.tiktoken").write_bytes(b"".join(lines_of_ranks[:500]))
            seeds.append(Seed("tiktoken", f"{name}.tiktoken", {"pattern": name.split("_")[0], "special_tokens": list(specials)}))
    else:  # without bpe-openai: the BPE trained here, as tiktoken ranks
        polytok.train(counts, vocab_size=320, progress=False).save_tiktoken(directory / "bpe.tiktoken")
        seeds.append(Seed("tiktoken", "bpe.tiktoken", {"pattern": "cl100k", "special_tokens": fuzz_files.SPECIALS}))
    (directory / "seeds.json").write_text(json.dumps([asdict(seed) for seed in seeds]), encoding="utf-8")
    return seeds


class Pool:
    """The seeds and one worker, started again whenever a mutant killed it."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.seeds = write_seeds(directory)
        self.contents = {seed.name: (directory / seed.name).read_bytes() for seed in self.seeds}
        self.worker = fuzz_files.Worker(directory, MEMORY_GB, 0)

    def outcome(self, mutant: fuzz_files.Mutant) -> tuple[str, str]:
        if not self.worker.alive:
            self.worker.kill()
            self.worker = fuzz_files.Worker(self.directory, MEMORY_GB, 0)
        outcome, detail, _ = self.worker.ask(mutant, TIMEOUT_SECONDS)
        return outcome, detail


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory):
    pool = Pool(tmp_path_factory.mktemp("fuzz-seeds"))
    yield pool
    pool.worker.kill()


def test_every_format_has_seeds(pool):
    assert sorted({seed.format for seed in pool.seeds}) == sorted(fuzz_files.FORMATS)
    for seed in pool.seeds:  # an unchanged seed loads and encodes: the worker's "ok" is reachable
        mutant = fuzz_files.Mutant(seed, "unchanged", pool.contents[seed.name], "seed" + Path(seed.name).suffix, "own")
        assert pool.outcome(mutant) == ("ok", ""), seed.name


def test_the_worker_reports_a_death_and_starts_again(pool):
    worker = pool.worker
    worker.job, worker.started = "junk", time.monotonic()
    worker.process.stdin.write(struct.pack("<I", 3) + b"xyz")  # not a pickle: the worker dies
    outcome, detail, _ = worker.collect()
    assert outcome == "abort" and detail.startswith("worker exited with 1") and "UnpicklingError" in detail
    assert not worker.alive
    seed = next(seed for seed in pool.seeds if seed.format == "polytok")
    assert pool.outcome(fuzz_files.Mutant(seed, "unchanged", pool.contents[seed.name], "seed.json", "load")) == ("ok", "")
    assert pool.worker is not worker


@pytest.mark.parametrize("format_name", fuzz_files.FORMATS)
def test_mutants_load_or_raise_polytok_errors(pool, format_name):
    @settings(max_examples=MUTANTS_PER_FORMAT, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(st.randoms(use_true_random=True))
    def check(rng):
        mutant = fuzz_files.make_mutant(pool.seeds, pool.contents, format_name, rng)
        outcome, detail = pool.outcome(mutant)
        if outcome not in ("ok", "polytok.Error"):
            saved = pool.directory / f"failed-{format_name}-{len(list(pool.directory.glob('failed-*')))}{Path(mutant.name).suffix}"
            saved.write_bytes(mutant.data)
            pytest.fail(f"{format_name} mutant of {mutant.seed.name} ({mutant.note[:300]}), read with {mutant.reader} as "
                        f"{mutant.name}, saved as {saved}: {outcome}\n{detail}")

    check()
