"""Conversations in Postgres, shared by the daemons of a fleet (docs/scale.md).

Imported only when a store URL is configured (`jpd.core.storage`); the only package
that imports psycopg (an import-linter contract in pyproject.toml).
"""

from jpd.conversation.pg.store import PgStore

__all__ = ["PgStore"]
