"""The config's validators are built once, for the whole tree, when the first config
loads (the first turn): no sub-table model builds one of its own to make a default
instance when the module loads. The defaults themselves are unchanged."""

from __future__ import annotations

import json
import subprocess
import sys

REPORT = r"""
import json
import jpd.config as c
from jpd.config import models
loaded = {m.__name__: m.__pydantic_complete__ for m in (c.Config, models.ModelParameters,
          models.ModelConfig, models.AssistantConfig, models.DaemonConfig)}
c.Config.model_validate({"assistant": {"model": {"id": "test/x"}}})
used = {m.__name__: m.__pydantic_complete__ for m in (c.Config, models.ModelParameters)}
print(json.dumps({"loaded": loaded, "used": used}))
"""


def test_only_the_root_builds_a_validator() -> None:
    out = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert not any(report["loaded"].values()), report  # nothing built at import
    assert report["used"] == {"Config": True, "ModelParameters": False}


def test_sub_tables_default_to_their_defaults() -> None:
    from jpd.config import Config
    from jpd.config.models import DaemonConfig, ModelParameters

    config = Config()
    assert config.assistant.model.id == "local/smollm2"
    assert config.assistant.model.parameters == ModelParameters.model_validate({})
    assert config.daemon == DaemonConfig.model_validate({})
    assert config.conversation.protected_paths.names == [".git", ".jp", ".vscode", ".idea"]
    assert config.model_fields_set == set()  # defaults are not "set" (merges skip them)
    over = Config.model_validate({"daemon": {"idle_timeout": 5}})
    assert over.model_fields_set == {"daemon"}
    assert over.daemon.model_fields_set == {"idle_timeout"}
    assert over.daemon.log_level == "WARNING"
