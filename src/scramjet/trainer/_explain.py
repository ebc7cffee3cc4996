"""Clearer errors for the usual causes of a failed forward on a batch: what the batch held,
what the model expected, and how to fix it. Any other error is left to the caller to
re-raise as it is."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn


def explain_one_sample_batch(error: ValueError, batches_before: int) -> None:
    """Raise a clearer error for a normalisation layer given a training batch of one
    sample (usually an epoch's last batch: the remainder of the dataset's length divided
    by the batch size); return for any other error."""
    if "Expected more than 1 value per channel" not in str(error):
        return
    raise ValueError(
        f"a training batch of one sample (batch {batches_before + 1} of the epoch) reached a "
        f"normalisation layer that needs more than one value per channel in training mode "
        f"(BatchNorm: {error}). An epoch's last batch holds the remainder of len(dataset) / "
        f"batch size; drop it with train_dataloader_kwargs={{'drop_last': True}}, or choose "
        f"a batch size that leaves a remainder other than 1."
    ) from error


def explain_batch_error(
    error: Exception, model: nn.Module, batch: Any, hook: str, batches_before: int | None = None
) -> None:
    """Raise a clearer error for the usual causes of a failed forward on a batch (a
    training batch of one sample; inputs of another floating dtype than the weights;
    inputs left a list of tensors);
    return for any other error, which the caller re-raises as it is."""
    if isinstance(error, ValueError) and batches_before is not None:
        explain_one_sample_batch(error, batches_before)
    if isinstance(error, ValueError):
        explain_decoder_inputs(error, model, batch, hook)
    if isinstance(error, RuntimeError) and "type" in str(error):
        explain_input_dtype(error, model, batch, hook)
        explain_integer_inputs(error, model, batch, hook)
        explain_complex_inputs(error, model, batch, hook)
    if isinstance(error, TypeError) and re.search(r"must be Tensor, not (list|tuple)", str(error)):
        explain_sequence_inputs(error, batch, hook)


def explain_decoder_inputs(error: ValueError, model: nn.Module, batch: Any, hook: str) -> None:
    """An encoder-decoder model (T5, BART ...) given a dict batch without ``labels`` or
    decoder inputs: its decoder has nothing to read, and transformers' error names the
    decoder's missing ``input_ids`` while the batch holds the encoder's."""
    config = getattr(model, "config", None)
    if not getattr(config, "is_encoder_decoder", False) or not isinstance(batch, Mapping):
        return
    if {"labels", "decoder_input_ids", "decoder_inputs_embeds"} & set(batch):
        return
    raise ValueError(
        f"{error}\nIn {hook}, {type(model).__name__} is an encoder-decoder model and the "
        f"batch (keys {', '.join(map(repr, batch))}) holds no 'labels' and no "
        f"'decoder_input_ids', so its decoder has no input. Add the target sequences as "
        f"'labels' (the decoder inputs are made from them, and the logits are the "
        f"teacher-forced ones), or 'decoder_input_ids'; to generate sequences from the "
        f"inputs alone, call model.generate(...)."
    ) from error


def explain_sequence_inputs(error: TypeError, batch: Any, hook: str) -> None:
    """An ``(inputs, targets)`` batch whose inputs are a list of tensors (a collate_fn that
    left sequences of different lengths unpadded): torch only says a list is no tensor."""
    inputs = batch[0] if isinstance(batch, list | tuple) and len(batch) >= 2 else None
    if not isinstance(inputs, list | tuple) or not inputs:
        return
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        return
    shapes = sorted({tuple(t.shape) for t in inputs})
    shown = ", ".join(map(str, shapes[:4])) + (", ..." if len(shapes) > 4 else "")
    raise TypeError(
        f"{error}\nIn {hook}, the batch's inputs are a {type(inputs).__name__} of "
        f"{len(inputs)} tensors (shapes {shown}), not one tensor, so the model received a "
        f"{type(inputs).__name__}. Make the collate_fn return the inputs as one tensor: "
        f"torch.stack(inputs) for samples of one shape, or "
        f"torch.nn.utils.rnn.pad_sequence(inputs, batch_first=True) for sequences of "
        f"different lengths (with their lengths or a mask if the model needs them)."
    ) from error


def explain_input_dtype(error: RuntimeError, model: nn.Module, batch: Any, hook: str) -> None:
    """Inputs whose floating dtype is not the weights' (numpy's float64 arrays through
    ``torch.from_numpy`` into a float32 model): torch only says that two dtypes differ."""
    weights = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    if weights is None:
        return
    said = str(error).lower()  # torch names a dtype as 'Double' or 'torch.float64'
    found = sorted(
        str(t.dtype)
        for t in {t.dtype: t for t in _tensors(batch) if t.is_floating_point()}.values()
        if t.dtype != weights and _DTYPE_WORDS.get(t.dtype, "float") in said
    )
    if not found:
        return
    short = str(weights).removeprefix("torch.")
    convert = _CONVERSIONS.get(weights, f"x.to(torch.{short})")
    numpy = (
        "numpy arrays are float64 by default, and torch.from_numpy / torch.as_tensor keep that. "
        if "torch.float64" in found
        else ""
    )
    raise RuntimeError(
        f"{error}\nIn {hook}, the batch holds {' and '.join(found)} tensors, but the model's "
        f"weights are {weights}: a layer needs its inputs in the dtype of its weights. "
        f"{numpy}Convert the inputs in the dataset or a collate_fn ({convert}, or "
        f"torch.as_tensor(x, dtype=torch.{short})), or convert the model to the data's dtype "
        f"(model.to(dtype)) before creating the optimizer."
    ) from error


def explain_integer_inputs(error: RuntimeError, model: nn.Module, batch: Any, hook: str) -> None:
    """Integer inputs of an ``(inputs, targets)`` batch into floating weights (uint8 images,
    int64 numbers): torch names the dtypes only as 'Byte' or 'unsigned char'. Only the
    inputs are read: integer targets are what classification losses take."""
    weights = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    inputs = batch[0] if isinstance(batch, list | tuple) and len(batch) >= 2 else None
    if weights is None or inputs is None:
        return
    said = str(error).lower()
    words = {t.dtype: _INT_WORDS.get(t.dtype, ()) for t in _tensors(inputs)}
    found = sorted(
        str(dtype) for dtype, names in words.items()
        if any(re.search(rf"\b{name}\b", said) for name in names)
    )  # fmt: skip
    if not found:
        return
    convert = _CONVERSIONS.get(weights, f"x.to({weights})")
    raise RuntimeError(
        f"{error}\nIn {hook}, the batch's inputs are {' and '.join(found)} tensors, but the "
        f"model's weights are {weights}: a layer computes in the dtype of its weights. "
        f"Convert the inputs in the dataset or a collate_fn: images of 0-255 pixels as "
        f"{convert} / 255 (then normalise them as the model expects), other numbers as "
        f"{convert}. Token or category ids are not converted: they go through an "
        f"nn.Embedding first."
    ) from error


def explain_complex_inputs(error: RuntimeError, model: nn.Module, batch: Any, hook: str) -> None:
    """Complex inputs (FFT features, I/Q signals) into real weights: torch says only
    'ComplexFloat and Float', and converting with x.float() would drop the imaginary part."""
    weights = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    if weights is None or "complex" not in str(error).lower():
        return
    found = sorted({str(t.dtype) for t in _tensors(batch) if t.is_complex()})
    if not found:
        return
    raise RuntimeError(
        f"{error}\nIn {hook}, the batch holds {' and '.join(found)} tensors, but the model's "
        f"weights are {weights}: its layers compute with real numbers. Turn the complex "
        f"inputs into real ones in the dataset or a collate_fn: torch.view_as_real(x) "
        f"(real and imaginary parts as a last dimension of 2; flatten it into the features "
        f"or channels), or x.abs() and x.angle() for magnitude and phase."
    ) from error


_INT_WORDS: dict[torch.dtype, tuple[str, ...]] = {
    torch.uint8: ("byte", "unsigned char"),
    torch.int8: ("char",),
    torch.int16: ("short",),
    torch.int32: ("int",),
    torch.int64: ("long",),
}
_DTYPE_WORDS = {torch.float64: "double", torch.float16: "half", torch.bfloat16: "bfloat16"}
_CONVERSIONS = {
    torch.float32: "x.float()",
    torch.float64: "x.double()",
    torch.float16: "x.half()",
    torch.bfloat16: "x.bfloat16()",
}


def _tensors(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """The tensors in a batch (tensors, sequences and mappings, a few levels deep)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 4 and isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors(item, depth + 1)
    elif depth < 4 and isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item, depth + 1)
