"""Token accounting and compaction (protocol.md 12.5): how full a conversation's
context is, and what is sent to the model when it would not fit.

`window` knows the windows, `count` the sizes, `plan` where to cut, `summary` writes
summaries, and `keeper` puts them together for a turn. Nothing here rewrites the log:
a compaction is a `context_compacted` event, and the model's view is rebuilt from the
log by `jpd.llm.history`.
"""
