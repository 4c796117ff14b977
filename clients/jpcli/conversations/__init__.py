"""Conversations in `jp`: listing, showing, choosing (`basic`), what a conversation keeps
(`settings`), organising them (`organize`: fork, grep, labels, titles, archive, pin) and
their command line (`cli`). Empty itself, so that building the parser stays cheap."""
