"""Applying a tokeniser beyond encode/decode: decode streams, offsets, truncation, chunks and
padding, token healing, and the per-tokeniser tables they share. The tokenisers' methods call
these modules; the modules name the tokeniser classes only for type checking.
"""
