"""The embedded default storage: one directory of JSONL files per conversation."""
