"""The one module that uses a private member of pygls, kept small on purpose.

pygls 2.x sends every response through `JsonRPCProtocol._send_response(msg_id, result,
error)` and serializes `result` with `json.dumps`. A large read (`conversation/get`) is
already JSON on disk; decoding and re-encoding it would cost more than the rest of the
request, so a handler may return `EncodedResult` and this protocol writes its bytes
verbatim; other results it encodes itself, as pygls would. `tests/unit/test_pygls_private.py`
fails loudly if a pygls upgrade renames or reshapes the hook.
"""

from __future__ import annotations

import json
from typing import Any

from lsprotocol.types import ResponseError
from pygls.protocol import JsonRPCProtocol


class EncodedResult:
    """A result already encoded as JSON (large reads sent without a decode/re-encode)."""

    __slots__ = ("json",)

    def __init__(self, json: bytes) -> None:
        self.json = json


class EncodedResultProtocol(JsonRPCProtocol):
    """A pygls protocol that sends an `EncodedResult` as it is, and says which writes are
    answers (`answering`: the writer queues them ahead of notifications)."""

    answering: Any = None
    """The id of the request whose answer is being written (None: not an answer)."""

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: ResponseError | None = None
    ) -> None:
        self.answering = msg_id
        try:
            self._send_answer(msg_id, result, error)
        finally:
            self.answering = None

    def _send_answer(self, msg_id: Any, result: Any | None, error: ResponseError | None) -> None:
        if error is None and self.writer is not None and msg_id not in self._result_types:
            if not isinstance(result, EncodedResult):
                # A plain JSON result (handlers return `to_wire()` dicts): encoded here
                # as pygls would, without its attrs envelope, whose cattrs hooks cost the
                # first answer of a `jp --stdio query` ~2 ms to generate.
                try:
                    result = EncodedResult(
                        json.dumps(result, default=self._serialize_message).encode()
                    )
                except Exception:  # pygls fails on it again and reports it, as it always did
                    super()._send_response(msg_id, result=result, error=error)
                    return
            head = b'{"jsonrpc": "2.0", "id": %s, "result": ' % json.dumps(msg_id).encode()
            self.writer.write(b"".join((head, result.json, b"}")))  # see framing.encode_frame
            return
        super()._send_response(msg_id, result=result, error=error)
