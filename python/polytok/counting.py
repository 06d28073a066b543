"""`polytok.count`: the one place that chooses where a corpus is counted, in this process
(`counts.count_local`) or on a Ray cluster (`distributed.count_on_ray`)."""
from __future__ import annotations

from polytok import checks
from polytok.corpus import Source
from polytok.counts import PreTokenCounts, count_local
from polytok.distributed import count_on_ray
from polytok.errors import ConfigError

#: Where `count` runs: in this process, or on a Ray cluster (polytok.distributed).
ENGINES = ("local", "ray")


def count(
    corpus: Source,
    pattern: str | None = checks.DEFAULT_PATTERN,
    special_tokens: list[str] | None = None,
    *,
    num_threads: int | None = None,
    progress: bool = True,
    text_field: str = "text",
    text_column: str = "text",
    errors: str = "strict",
    engine: str = "local",
    address: str | None = None,
) -> PreTokenCounts:
    """Count the pre-tokens of a corpus (see `polytok.corpus.iter_documents`) in the Rust core,
    on `num_threads` threads (None: all cores). Special tokens are split out and not counted.

    engine="ray" counts corpus files on a Ray cluster instead (`polytok.distributed`): `address`
    is "local" (a new local cluster), "auto" (the cluster started on this machine), host:port, or
    None (the current Ray connection, else Ray's default); `num_threads` is then the threads of
    each task (None: 1). The counts are the same as the local engine's, whatever the workers.
    """
    checks.num_threads(num_threads)
    options = {"num_threads": num_threads, "progress": progress, "text_field": text_field,
               "text_column": text_column, "errors": errors}
    if engine == "ray":
        return count_on_ray(corpus, pattern, special_tokens, address=address, **options)
    if engine != "local":
        raise ConfigError(f"engine={engine!r}; expected one of {', '.join(map(repr, ENGINES))}")
    if address is not None:
        raise ConfigError(f"address={address!r} is for engine='ray'; the local engine takes none")
    return count_local(corpus, pattern, special_tokens, **options)
