"""A `transformers.PreTrainedTokenizerFast` from a polytok tokeniser: the HF tokenizer.json that
`save_huggingface` writes (same ids, same decoding) wrapped with its special tokens named.

bos, eos and pad are found among the special tokens by their usual spellings (BOS_TOKENS,
EOS_TOKENS, chunking.PAD_TOKENS) unless given; the wrapper decodes without cleaning up
spaces, so `decode` gives polytok's text. Needs the `transformers` package (not a dependency
of polytok: `pip install transformers`).
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polytok.apply.chunking import PAD_TOKENS
from polytok.errors import ConfigError

if TYPE_CHECKING:
    from polytok.base_tokenizer import BaseTokenizer

BOS_TOKENS = ("<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>", "<|bos|>", "[CLS]")
EOS_TOKENS = ("</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "<|eos|>", "[SEP]")
UNK_TOKENS = ("<unk>", "[UNK]")


def _named(tokenizer: BaseTokenizer, given: str | None, spellings: tuple[str, ...], role: str) -> str | None:
    """The text of the tokeniser's `role` token: `given` (which must be a token), else the first
    of `spellings` it has, else None."""
    known = set(tokenizer.special_tokens) | {token["content"] for token in getattr(getattr(tokenizer, "pipeline", None), "added", [])}
    if given is not None:
        if given not in known:
            raise ConfigError(f"{role}_token {given!r} is not a special token of this tokeniser; its special tokens are {sorted(known)}")
        return given
    return next((text for text in spellings if text in known), None)


def to_transformers(
    tokenizer: BaseTokenizer,
    *,
    bos_token: str | None = None,
    eos_token: str | None = None,
    pad_token: str | None = None,
    unk_token: str | None = None,
    model_max_length: int | None = None,
) -> Any:
    """A PreTrainedTokenizerFast with `tokenizer`'s ids and decoding, bos/eos/pad/unk mapped to
    its special tokens (found by spelling unless given). An extension (`polytok.extend`) notes
    its new ids in `init_kwargs["polytok_extended"]`. ConfigError when transformers is not
    installed or the tokeniser has no HF tokenizer.json form."""
    try:
        import tokenizers
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        raise ConfigError("to_transformers needs the transformers package: pip install transformers") from None
    roles = {
        "bos_token": _named(tokenizer, bos_token, BOS_TOKENS, "bos"),
        "eos_token": _named(tokenizer, eos_token, EOS_TOKENS, "eos"),
        "pad_token": _named(tokenizer, pad_token, PAD_TOKENS, "pad"),
        "unk_token": _named(tokenizer, unk_token, UNK_TOKENS, "unk"),
    }
    with tempfile.TemporaryDirectory(prefix="polytok-") as folder:
        path = Path(folder) / "tokenizer.json"
        tokenizer.save_huggingface(path)
        backend = tokenizers.Tokenizer.from_file(str(path))
    options: dict[str, Any] = {role: text for role, text in roles.items() if text is not None}
    if model_max_length is not None:
        options["model_max_length"] = model_max_length
    extended = (getattr(tokenizer, "training", None) or {}).get("extended")
    if extended:
        # which embedding rows are new, in init_kwargs and so in save_pretrained's tokenizer_config.json
        options["polytok_extended"] = {"base_vocab_size": extended["base_vocab_size"],
                                       "new_ids": [extended["first_new_id"], tokenizer.n_vocab]}
    return PreTrainedTokenizerFast(tokenizer_object=backend, clean_up_tokenization_spaces=False, **options)
