"""qpolicy from Python: vLLM's online-quantization front end and qpolicy's kernels.

The C++ library does the work (the extension module ``qpolicy._qpolicy``); the results are the ones the
``qpolicy`` CLI prints:

- ``resolve(quantization, config, legacy=False, vllm=None)``: vLLM's ``quantization`` + ``quantization_config``
  resolved, as ``qpolicy resolve`` prints it (a dict, or None when nothing is configured);
- ``plan(config, model)``: what vLLM does with each layer of a model, as a ``Plan``;
- ``quantize_tensor(tensor, key)``: one quant key's or low-precision formula's codes and scales for a
  2-D torch tensor, NumPy array or ml_dtypes bfloat16 array.

Invalid configurations and models raise ``ConfigError`` with vLLM's location and message; what the
front end notices on the way (duplicate keys, deferred names) is issued as ``QPolicyWarning``.
"""
from __future__ import annotations

import json
import os
import warnings as _warnings
from typing import Any, Iterator, Mapping, Optional, Sequence, Tuple, Union

from . import _qpolicy

__version__: str = _qpolicy.__version__
#: Whether the library holds the CUDA kernels.
WITH_CUDA: bool = _qpolicy.with_cuda

__all__ = ["ConfigError", "Plan", "QPolicyWarning", "WITH_CUDA", "__version__", "dequantize_tensor", "plan", "plan_model_dir",
           "quantize_tensor", "releases", "resolve"]


class QPolicyWarning(UserWarning):
    """What the front end noticed while resolving (the CLI's ``warning:`` lines)."""


class ConfigError(ValueError):
    """An invalid quantization config or model (the CLI's exit status 2).

    Attributes:
        loc: where the first error is, as vLLM names it (``"linear.weight"``); ``""`` when the message
            names no field.
        message: vLLM's message of the first error.
        errors: every ``(loc, message)`` pair, the first one included (a config with several bad fields
            reports each; a plan reports each failed layer).
        plan: for a plan in which layers failed, the whole ``Plan`` (the failed layers carry ``"error"``);
            otherwise None.
    """

    def __init__(self, errors: Sequence[Tuple[str, str]], plan: Optional["Plan"] = None) -> None:
        self.errors = [(str(loc), str(message)) for loc, message in errors]
        self.loc, self.message = self.errors[0]
        self.plan = plan
        super().__init__(f"{self.loc}: {self.message}" if self.loc else self.message)


def _config_text(config: Union[None, str, Mapping[str, Any]]) -> Optional[str]:
    if config is None:
        return None
    if isinstance(config, str):
        return config  # JSON text, as the CLI's -c takes it
    return json.dumps(config)


def _warn(messages: Sequence[str]) -> None:
    for m in messages:
        _warnings.warn(m, QPolicyWarning, stacklevel=3)


def releases() -> list:
    """The vLLM releases qpolicy follows (``"0.30"`` ... ``"0.34"``); the last is the default."""
    return list(_qpolicy.releases())


def _release(vllm: Optional[str], legacy: bool) -> Optional[str]:
    if vllm is None:
        return None
    if legacy:
        raise ValueError("legacy=True is a schema of its own (in no vLLM release from 0.29 on); it takes no vllm")
    known = releases()
    if vllm not in known:
        raise ValueError(f"vllm must be a vLLM release qpolicy knows, one of {known}; got {vllm!r}")
    return vllm


def resolve(quantization: Optional[str], config: Union[None, str, Mapping[str, Any]] = None, legacy: bool = False,
            vllm: Optional[str] = None) -> Optional[dict]:
    """Resolves vLLM's ``quantization`` and ``quantization_config`` as vLLM does.

    Args:
        quantization: vLLM's ``quantization`` argument: an online shorthand (``"fp8_per_block"``),
            ``"online"``, a checkpoint method (``"fp8"``), or None.
        config: ``quantization_config`` as a dict or as JSON text; None when absent.
        legacy: the legacy schema (``global_scheme``, ``*_scheme_override``, ``ignore``).
        vllm: the vLLM release whose rules to follow (``"0.30"`` ... ``"0.34"``); None: the newest.

    Returns:
        The resolved configuration, as ``qpolicy resolve`` prints it, or None when nothing is
        configured (a checkpoint method, or no quantization).

    Raises:
        ConfigError: the configuration is invalid (every bad field in ``errors``).
    """
    text, warnings, errors = _qpolicy.resolve(quantization, _config_text(config), legacy, _release(vllm, legacy))
    if errors:
        raise ConfigError(errors)
    _warn(warnings)
    return json.loads(text)


_SOURCES = {
    "linear": "quantization_config.linear",
    "moe": "quantization_config.moe",
    "targets": "quantization_config.targets",
    "ignore": "quantization_config.ignore",
    "global": "global_scheme",
    "linear_scheme_override": "linear_scheme_override",
    "moe_scheme_override": "moe_scheme_override",
}


class Plan:
    """What vLLM does with each layer of a model, as ``qpolicy plan --format json`` prints it.

    Attributes:
        layers: one dict per model layer, in model order: ``name``, ``class``, ``kind`` and either
            ``method``, ``weight``, ``activation``, ``source``, ``pattern`` or ``error``.
        summary: the quantized layers grouped by (suffix, rule, pattern, key), one line each.
        warnings: patterns that matched nothing and what the front end noticed.
        table: the plan as ``qpolicy plan`` prints it by default.
        checkpoint: for an already-quantized model directory (plan_model_dir), its method
            (``quant_method``, vLLM's ``method``, ``description``); each layer then also has
            ``composition`` (kept, requantized, online, unquantized) and ``checkpoint`` (the
            checkpoint's ``method``, vLLM's ``class``, ``scheme`` and ``rule``). None otherwise.
    """

    def __init__(self, document: Mapping[str, Any], table: str) -> None:
        self.layers: list = list(document["layers"])
        self.summary: list = list(document.get("summary", []))
        self.warnings: list = list(document.get("warnings", []))
        self.table: str = table
        self.checkpoint: Optional[dict] = document.get("checkpoint")
        self._by_name = {layer["name"]: layer for layer in self.layers}

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.layers)

    def __getitem__(self, name: str) -> dict:
        """The record of the layer called ``name``; KeyError naming it when the model has none."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"the model has no layer {name!r}") from None

    @property
    def errors(self) -> list:
        """``(layer name, message)`` for each layer that failed."""
        return [(layer["name"], layer["error"]) for layer in self.layers if "error" in layer]

    def explain(self, layer: str) -> str:
        """One sentence: what happens to ``layer`` and which rule decided it."""
        r = self[layer]
        head = f"{r['name']} ({r['kind']}, {r['class']})"
        if "error" in r:
            return f"{head}: error: {r['error']}"
        method, source, pattern = r.get("method"), r.get("source"), r.get("pattern")
        rule = _SOURCES.get(source, source) if source else None
        if rule and pattern is not None:
            rule += f" pattern {pattern!r}"
        if method in (None, "unquantized"):
            if rule:
                return f"{head}: stays unquantized, decided by {rule}"
            return f"{head}: stays unquantized; no rule of the config applies to it"
        activation = r.get("activation")
        act = ("the scheme's default" if activation == "default" else "none (weight-only)" if activation is None else activation)
        return f"{head}: {method}, weights {r.get('weight')}, activations {act}; decided by {rule}"


def plan(
    config: Union[None, str, Mapping[str, Any]],
    model: Union[Mapping[str, Any], Sequence[Mapping[str, Any]], str],
    *,
    quantization: Optional[str] = "online",
    legacy: bool = False,
    check_shapes: bool = False,
    tp: int = 1,
    vllm: Optional[str] = None,
) -> Plan:
    """Plans a model: for every layer, the method, keys and the rule that decided it.

    Args:
        config: ``quantization_config`` as a dict or JSON text (None when absent).
        model: the MODEL.json document (a dict with ``layers``), a list of layer dicts, or its JSON text.
        quantization: vLLM's ``quantization`` argument (default ``"online"``; a shorthand such as
            ``"fp8_per_block"`` with ``config=None`` works too).
        legacy: the legacy schema.
        vllm: the vLLM release whose rules to follow (``"0.30"`` ... ``"0.34"``); None: the newest.
        check_shapes, tp: the shape checks of ``qpolicy plan --check-shapes --tp N``.

    Raises:
        ConfigError: the configuration or the model is invalid, or layers failed (then ``plan`` holds
            the whole plan and ``errors`` every failed layer's message).
    """
    if isinstance(model, str):
        model_text = model
    elif isinstance(model, Mapping):
        model_text = json.dumps(model)
    else:
        model_text = json.dumps({"layers": list(model)})
    text, table, errors = _qpolicy.plan(quantization, _config_text(config), legacy, model_text, check_shapes, tp,
                                        _release(vllm, legacy))
    return _checked_plan(text, table, errors)


def _checked_plan(text: str, table: str, errors: list) -> Plan:
    """The Plan of a plan's JSON text; ConfigError for the config's errors, or (carrying the plan) failed layers."""
    if errors:
        raise ConfigError(errors)
    result = Plan(json.loads(text), table)
    failed = result.errors
    if failed:
        raise ConfigError([("", message) for _, message in failed], plan=result)
    return result


def plan_model_dir(
    directory: Union[str, "os.PathLike[str]"],
    config: Union[None, str, Mapping[str, Any]] = None,
    *,
    quantization: Optional[str] = None,
    model: Union[None, Mapping[str, Any], str] = None,
    check_shapes: bool = False,
    tp: int = 1,
    vllm: Optional[str] = None,
) -> Plan:
    """Plans a Hugging Face model directory, as ``qpolicy plan --model-dir``.

    The layers come from the tensor names (or ``model``, a MODEL.json document or its text). For an
    already-quantized model (config.json has a ``quantization_config``: fp8, compressed-tensors,
    gpt-oss's mxfp4, ModelOpt FP8/NVFP4) each layer says what the release does when the online config
    meets the checkpoint's method: ``kept``, ``requantized``, ``online`` or ``unquantized``.

    Args:
        directory: the model directory.
        config: the online ``quantization_config`` as a dict or JSON text (None when absent).
        quantization: vLLM's ``quantization`` argument (None, as vLLM's default; a checkpoint method
            other than the directory's is vLLM's mismatch error).
        vllm: the vLLM release whose rules to follow; None: the newest.

    Raises:
        ConfigError: an invalid config, model or checkpoint (an unknown method), or layers failed
            (``plan`` then holds the whole plan).
        OSError: the directory cannot be read.
    """
    if isinstance(model, Mapping):
        model = json.dumps(model)
    text, table, errors, io = _qpolicy.plan_model_dir(os.fspath(directory), quantization, _config_text(config), model,
                                                      check_shapes, tp, _release(vllm, False))
    if io:
        raise OSError(io)
    return _checked_plan(text, table, errors)


def _as_2d(tensor: Any) -> Tuple[Any, str]:
    """A C-contiguous 2-D view of the tensor's bits, and its element type ("bf16", "f16", "f32")."""
    module = type(tensor).__module__
    if module.startswith("torch"):
        import torch

        if tensor.device.type not in ("cpu", "cuda"):
            raise ValueError(f"quantize_tensor takes CPU and CUDA tensors, got one on {tensor.device}")
        kinds = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}
        if tensor.dtype not in kinds:
            raise TypeError(f"quantize_tensor takes bfloat16, float16 or float32 tensors, got {tensor.dtype}")
        x = tensor.detach().contiguous()
        element = kinds[tensor.dtype]
        if element != "f32":
            x = x.view(torch.int16)  # the bits, which DLPack carries for every NumPy and nanobind version
        return x, element
    import numpy as np

    x = np.asarray(tensor)
    if x.dtype.name == "bfloat16":  # ml_dtypes.bfloat16
        return np.ascontiguousarray(x).view(np.uint16), "bf16"
    if x.dtype == np.float16:
        return np.ascontiguousarray(x), "f16"
    if x.dtype == np.float32:
        return np.ascontiguousarray(x), "f32"
    raise TypeError(f"quantize_tensor takes bfloat16 (ml_dtypes), float16 or float32 arrays, got {x.dtype}")


def quantize_tensor(tensor: Any, key: str, *, ue8m0: bool = False, scale_layout: str = "row", threads: int = 0) -> dict:
    """Quantizes a 2-D tensor with an FP8 quant key's or a low-precision formula's kernel.

    Args:
        tensor: a torch tensor, NumPy array or ml_dtypes bfloat16 array, [rows, cols], of bfloat16,
            float16 or float32 (the low-precision formulas that compute in the model dtype take
            bfloat16 or float16). Read in place, not copied, when contiguous.
        key: ``qpolicy quantize-tensor``'s ``--key``: an FP8 quant key (``fp8_per_block_static``, ...)
            or a low-precision formula (``mxfp8``, ``mxfp4``, ``nvfp4``, ...).
        ue8m0, scale_layout: ``--ue8m0`` and ``--scale-layout`` (``"row"``, ``"col"``, ``"col-tma"``,
            ``"swizzled"``).
        threads: CPU threads (0: all).

    Returns:
        The tensors ``quantize-tensor`` writes, by name: ``"codes"`` (e4m3fn codes and packed e2m1 as
        uint8 bytes, INT8 as int8), ``"scale"`` (float32, or E8M0 / e4m3 bytes as uint8), and the
        second scales (``"scale_2"``, ``"scale_per_token"``): NumPy arrays for CPU input, torch tensors
        on the input's device for a CUDA tensor (quantized in place through DLPack, on the default
        stream, finished on return; a library built with CUDA). The GIL is released while the kernel
        runs.

    Raises:
        ValueError: an unknown key, a shape the formula cannot take (vLLM's message), a tensor that is
            not 2-D, or a CUDA tensor for a library built without CUDA.
        RuntimeError: a failed CUDA call.
        TypeError: an element type the kernels do not take.
    """
    x, element = _as_2d(tensor)
    if getattr(x, "ndim", None) != 2:
        raise ValueError(f"quantize_tensor takes a 2-D tensor, got shape {tuple(x.shape)}")
    parts = _qpolicy.quantize_tensor(x, element, key, ue8m0, scale_layout, threads)
    return {("codes" if suffix == "" else suffix.lstrip(".")): array for suffix, _, array in parts}


def dequantize_tensor(parts: Mapping[str, Any], key: str, *, dtype: str = "bf16", scale_layout: str = "row", threads: int = 0) -> Any:
    """Decodes what ``quantize_tensor`` returns for ``key`` back to a float tensor, as
    ``qpolicy quantize-tensor --key KEY --dequantize --dtype DTYPE`` does.

    Each element is its code times its scales in float32, rounded once to ``dtype``; NVFP4 as vLLM's
    dequantize_to_dtype, e2m1 x (e4m3 scale x scale_2).

    Args:
        parts: ``codes``, ``scale`` and, where the formula has one, ``scale_2``, ``scale_per_token`` or
            ``codebook`` (NumPy arrays, or anything NumPy reads, on the CPU).
        dtype: ``"bf16"`` (an ml_dtypes bfloat16 array when ml_dtypes is installed, else the bits as
            uint16), ``"f16"`` or ``"f32"``.
        scale_layout: ``"row"`` or ``"swizzled"`` (the 128x4 block-scale layout).

    Raises:
        ValueError: an unknown key or dtype, or parts whose sizes are not what the formula stores.
    """
    import numpy as np

    def raw(name):
        if name not in parts:
            return None
        return np.ascontiguousarray(np.asarray(parts[name])).view(np.uint8).reshape(np.asarray(parts[name]).shape[:-1] + (-1,))

    second = next((raw(n) for n in ("scale_2", "scale_per_token", "codebook") if n in parts), None)
    if "codes" not in parts or "scale" not in parts:
        raise ValueError("dequantize_tensor needs the 'codes' and 'scale' that quantize_tensor returns")
    out = _qpolicy.dequantize_tensor(key, raw("codes"), raw("scale"), second, dtype, scale_layout, threads)
    if dtype == "f16":
        return out.view(np.float16)
    if dtype == "bf16":
        try:
            import ml_dtypes

            return out.view(ml_dtypes.bfloat16)
        except ImportError:
            return out
    return out
