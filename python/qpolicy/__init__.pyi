# Type stubs of the qpolicy package (python/qpolicy/__init__.py holds the docstrings).
import os
from typing import Any, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy

__version__: str
WITH_CUDA: bool

_Config = Union[None, str, Mapping[str, Any]]

class QPolicyWarning(UserWarning): ...

class ConfigError(ValueError):
    loc: str
    message: str
    errors: list[Tuple[str, str]]
    plan: Optional[Plan]
    def __init__(self, errors: Sequence[Tuple[str, str]], plan: Optional[Plan] = ...) -> None: ...

def releases() -> list[str]: ...
def resolve(
    quantization: Optional[str], config: _Config = ..., legacy: bool = ..., vllm: Optional[str] = ...
) -> Optional[dict[str, Any]]: ...

class Plan:
    layers: list[dict[str, Any]]
    summary: list[str]
    warnings: list[str]
    table: str
    def __init__(self, document: Mapping[str, Any], table: str) -> None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[dict[str, Any]]: ...
    def __getitem__(self, name: str) -> dict[str, Any]: ...
    @property
    def errors(self) -> list[Tuple[str, str]]: ...
    checkpoint: Optional[dict[str, Any]]
    def explain(self, layer: str) -> str: ...

def plan(
    config: _Config,
    model: Union[Mapping[str, Any], Sequence[Mapping[str, Any]], str],
    *,
    quantization: Optional[str] = ...,
    legacy: bool = ...,
    check_shapes: bool = ...,
    tp: int = ...,
    vllm: Optional[str] = ...,
) -> Plan: ...

def plan_model_dir(
    directory: Union[str, "os.PathLike[str]"],
    config: _Config = ...,
    *,
    quantization: Optional[str] = ...,
    model: Union[None, Mapping[str, Any], str] = ...,
    check_shapes: bool = ...,
    tp: int = ...,
    vllm: Optional[str] = ...,
) -> Plan: ...

def dequantize_tensor(
    parts: Mapping[str, Any], key: str, *, dtype: str = ..., scale_layout: str = ..., threads: int = ...
) -> numpy.ndarray: ...

def quantize_tensor(
    tensor: Any, key: str, *, ue8m0: bool = ..., scale_layout: str = ..., threads: int = ...
) -> dict[str, Any]: ...  # NumPy arrays, or torch tensors for a CUDA tensor
