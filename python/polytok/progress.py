"""Progress bars: the one place that decides when a bar shows and what is left of it.

A bar appears only once its step has run for `DELAY_SECONDS`, so quick steps print nothing and a
command that fails at once prints only its error. A bar that an error ends is cleared, so the
error's message stands alone on the terminal.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from tqdm.auto import tqdm

#: How long a step runs before its bar appears.
DELAY_SECONDS = 0.5


@contextlib.contextmanager
def progress_bar(enabled: bool, **options: Any) -> Iterator[tqdm]:
    """A tqdm bar on stderr (nothing at all when not `enabled`); `options` go to tqdm."""
    bar = tqdm(disable=not enabled, delay=DELAY_SECONDS, **options)
    try:
        yield bar
    except BaseException:
        bar.leave = False
        raise
    finally:
        bar.close()
