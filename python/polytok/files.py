"""Files: every file polytok writes appears whole or not at all (atomic writes), and JSON files
are read with errors that say where they break."""
from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator

from polytok.errors import ConfigError, FormatError


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside `path`; rename it over `path` only if the block succeeds."""
    target = Path(path)
    directory = target.parent
    if not directory.is_dir():
        raise ConfigError(f"cannot write {target}: directory {directory} does not exist")
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, mode, encoding=None if "b" in mode else encoding) as stream:
            # mkstemp creates the file -rw-------; give it the mode a plain open() would leave.
            os.chmod(stream.fileno(), _mode_of_open(target))
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _mode_of_open(target: Path) -> int:
    """The permission bits `open(target, "w")` would leave: an existing file keeps its own, a new
    one gets 0o666 less the process's umask."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without changing it where Linux reports it (os.umask can only be
    read by setting it, which races with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename."""
    with atomic_write(path, "wb") as stream:
        stream.write(data)


def shown(value: Any) -> str:
    """`value` for an error message: its repr, cut to 80 characters (a file's value may be huge;
    an integer of thousands of digits is named by its size)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read_json(path: str | os.PathLike, what: str = "file") -> Any:
    """Parses the JSON file `path` (a `what`, as error messages call it); FormatError names the
    file and where it breaks."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise FormatError(f"cannot read {what} {path}: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FormatError(f"{what} {path}: invalid UTF-8 at byte {error.start}") from None
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except _RepeatedKey as error:
        raise FormatError(f"{what} {path}: the key {error.args[0]!r} appears twice in one JSON object") from None
    except json.JSONDecodeError as error:
        raise FormatError(
            f"{what} {path} is not valid JSON at line {error.lineno} column {error.colno} "
            f"({error.msg}); the file is truncated or was edited"
        ) from None
    except RecursionError:
        raise FormatError(f"{what} {path} nests its JSON arrays and objects too deeply to read") from None
    except ValueError as error:  # an integer of more digits than sys.get_int_max_str_digits()
        raise FormatError(f"{what} {path} is not JSON polytok can read: {error}") from None
    if _SURROGATE_ESCAPE.search(text) and (where := _lone_surrogate(value)) is not None:
        raise FormatError(f"{what} {path}: the string at {where} holds a lone surrogate escape (\\uD800-\\uDFFF "
                          "not in a pair), which is no Unicode text")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate(value: Any) -> str | None:
    """The JSON path of the first key or string in `value` with a lone surrogate, or None."""
    stack: list[tuple[str, Any]] = [("$", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _LONE_SURROGATE.search(item):
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                if _LONE_SURROGATE.search(key):
                    return f"{where} (a key)"
                stack.append((f"{where}[{key[:40]!r}]", child))
        elif isinstance(item, list):
            stack.extend((f"{where}[{index}]", child) for index, child in enumerate(item))
    return None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _RepeatedKey(ValueError):
    """A JSON object names the key args[0] twice (json.loads would keep the last silently)."""

def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's dict; _RepeatedKey if two of its keys are equal."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key[:80])
            seen.add(key)
    return result
