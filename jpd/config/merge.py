"""Merging configuration values: later layers over earlier ones, key by key.

Models merge field by field, but only over the fields a layer actually set
(`model_fields_set`), so a layer that sets `run` keeps the `timeout` of the layer
below it. Dict-typed fields (`tools`, `questions`, `parameters`, `options`, ...)
merge key by key. Scalars and arrays replace. Two exceptions, both deliberate:

- `command` replaces as a whole: half of one command and half of another is not
  a command anyone wrote.
- a `detached` table over a `detached` scalar keeps the scalar for the kinds the
  table leaves out, which is exactly what the detached cascade (protocol.md 10.2) resolves.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_REPLACE_WHOLE = frozenset({"command"})


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Merge plain dicts: nested dicts merge key by key, anything else replaces."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(below, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(below, value)
        else:
            merged[key] = value
    return merged


def merge_models(base: M, over: M) -> M:
    """Return `over` laid over `base`, field by field (see the module docstring).

    The result's `model_fields_set` is the union of both, so merges chain.
    """
    values: dict[str, Any] = {name: getattr(base, name) for name in base.model_fields_set}
    for name in over.model_fields_set:
        value = getattr(over, name)
        if name in values:
            value = _merge_field(type(over), name, values[name], value)
        values[name] = value
    return type(over).model_construct(_fields_set=set(values), **values)


def _merge_field(model: type[BaseModel], name: str, below: Any, value: Any) -> Any:
    if name in _REPLACE_WHOLE:
        return value
    if name == "detached" and isinstance(below, str) and isinstance(value, BaseModel):
        return _fill_unset(value, below)
    if isinstance(below, BaseModel) and type(below) is type(value):
        return merge_models(below, value)
    if isinstance(below, dict) and isinstance(value, dict) and _is_dict_field(model, name):
        return _merge_dicts(below, value)
    return value


def _merge_dicts(below: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(below)
    for key, value in over.items():
        previous = merged.get(key)
        if isinstance(previous, BaseModel) and type(previous) is type(value):
            merged[key] = merge_models(previous, value)
        elif isinstance(previous, dict) and isinstance(value, dict):
            merged[key] = deep_merge(previous, value)
        else:
            merged[key] = value
    return merged


def _fill_unset(table: M, scalar: str) -> M:
    values = {name: scalar for name in type(table).model_fields}
    values.update({name: getattr(table, name) for name in table.model_fields_set})
    return type(table).model_construct(_fields_set=set(values), **values)


def _is_dict_field(model: type[BaseModel], name: str) -> bool:
    """Whether the field is declared as a table (`dict[...]`), not an opaque value."""
    annotation = model.model_fields[name].annotation
    if typing.get_origin(annotation) is dict:
        return True
    return any(typing.get_origin(arg) is dict for arg in typing.get_args(annotation))
