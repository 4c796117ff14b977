"""The daemon's pydantic models are declared with evaluated annotations: a model module
with `from __future__ import annotations` has pydantic compile and evaluate a string per
field when its class is created, which the daemon pays at every start-up (the wire
models, the persisted events) or first turn (the config). protocol.md section 4,
"Start-up"."""

from __future__ import annotations

import importlib
import pkgutil

from pydantic import BaseModel

import jpd


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_no_jpd_model_declares_its_fields_as_strings() -> None:
    for info in pkgutil.walk_packages(jpd.__path__, "jpd."):
        if ".pg" in info.name or info.name.endswith("__main__"):
            continue  # the fleet store needs psycopg; `__main__` runs the daemon
        importlib.import_module(info.name)
    models = [m for m in _subclasses(BaseModel) if m.__module__.startswith("jpd.")]
    assert len(models) > 100
    stringly = sorted(
        f"{m.__module__}.{m.__qualname__}.{name}"
        for m in models
        for name, annotation in vars(m).get("__annotations__", {}).items()
        if isinstance(annotation, str)
    )
    # A self-reference (a recursive model) is the one string a class body needs.
    assert stringly == [
        "jpd.config.tools.ParameterConfig.items",
        "jpd.config.tools.ParameterConfig.properties",
    ]
