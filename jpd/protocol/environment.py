"""The `environment` a client sends with a request (protocol.md 5.5 "Client environment")."""

from pydantic import Field, field_validator

from jpd.protocol.base import WireParams


class ClientEnvironment(WireParams):
    """What one request runs with, from the client (protocol.md 5.5 "Client environment").

    Used for that request only: never persisted, logged, or shown to another client.
    """

    cwd: str | None = None
    """Absolute working directory: the workspace for `.jp/config.toml` and the tools' root."""
    env: dict[str, str] | None = Field(default=None, repr=False)
    """The client's environment variables. When sent, they replace the daemon's for this
    request: `JP_CONFIG`, provider API keys, and the tool subprocesses' environment."""
    additional_roots: list[str] = []
    """Absolute directories the workspace tools may use besides `cwd` (an editor's
    `additionalDirectories`); config layering still follows `cwd` alone."""
    umask: int | None = Field(default=None, ge=0, le=0o777)
    """The client's umask: files, folders and processes of the tools get it (absent: the
    workspace tools write files 0644 and processes keep the daemon's)."""

    @field_validator("cwd")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("must be an absolute path")
        return value

    @field_validator("additional_roots")
    @classmethod
    def _absolute_roots(cls, value: list[str]) -> list[str]:
        for root in value:
            if not root.startswith("/"):
                raise ValueError(f"{root!r} must be an absolute path")
        return value
