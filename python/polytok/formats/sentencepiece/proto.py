"""The protobuf wire format, as much of it as SentencePiece's ModelProto needs: a reader that
checks every length and tag it meets, and the field encoders the writer uses."""
from __future__ import annotations

import struct
from typing import Any

from polytok.errors import FormatError


def read_varint(data: bytes, at: int, source: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise FormatError(f"{source}: the protobuf data ends inside a number; the file is truncated")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise FormatError(f"{source}: a protobuf number is longer than 10 bytes; the file is corrupt")


def parse_message(data: bytes, source: str) -> dict[int, list[Any]]:
    """Field number -> values in order: ints for varint fields, bytes for length-delimited ones,
    4- and 8-byte fields as raw bytes."""
    fields: dict[int, list[Any]] = {}
    at = 0
    while at < len(data):
        key, at = read_varint(data, at, source)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise FormatError(f"{source}: protobuf field number 0 at byte {at}; the file is not a SentencePiece model")
        if wire == 0:
            value, at = read_varint(data, at, source)
        elif wire == 1:
            value, at = data[at : at + 8], at + 8
        elif wire == 2:
            length, at = read_varint(data, at, source)
            value, at = data[at : at + length], at + length
        elif wire == 5:
            value, at = data[at : at + 4], at + 4
        else:
            raise FormatError(f"{source}: protobuf wire type {wire} (field {number}) is not valid; the file is corrupt")
        if at > len(data):
            raise FormatError(f"{source}: field {number} runs past the end of the data; the file is truncated")
        fields.setdefault(number, []).append(value)
    return fields


def last_value(fields: dict[int, list[Any]], number: int, default: Any) -> Any:
    return fields[number][-1] if number in fields else default


def text_value(value: Any, field: str, source: str) -> str:
    try:
        return bytes_value(value, field, source).decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"{source}: {field} is not UTF-8 text") from None


def bytes_value(value: Any, field: str, source: str) -> bytes:
    """A length-delimited field's bytes; FormatError for a field of another wire type."""
    if not isinstance(value, bytes):
        raise FormatError(f"{source}: {field} is not a length-delimited field (protobuf wire type 2)")
    return value


def int_value(value: Any, field: str, source: str) -> int:
    """A varint field's value; FormatError for a field of another wire type."""
    if not isinstance(value, int):
        raise FormatError(f"{source}: {field} is not a number (protobuf wire type 0)")
    return value


def field_key(number: int, wire: int) -> bytes:
    return encode_varint(number << 3 | wire)


def encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int32 fields are ten-byte two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_bytes(number: int, data: bytes) -> bytes:
    return field_key(number, 2) + encode_varint(len(data)) + data


def field_int(number: int, value: int) -> bytes:
    return field_key(number, 0) + encode_varint(value)


def field_float(number: int, value: float) -> bytes:
    return field_key(number, 5) + struct.pack("<f", value)
