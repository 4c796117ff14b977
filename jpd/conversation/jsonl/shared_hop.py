"""One worker-thread hop shared by the calls that wait for it (`jpd.conversation.batched`)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.to_thread

from jpd.conversation.batched import Batched


class SharedHop(Batched):
    """`run(id)` joins the batch that waits for the next hop; up to `hops` hops run at
    once and the next batch fills meanwhile (while fewer run, a call has a hop of its
    own at once). `call_many` runs in the worker thread with the ids of a batch (an id
    may come twice) and returns the error of each id that failed."""

    def __init__(
        self, call_many: Callable[[list[str]], dict[str, Exception]], hops: int = 1
    ) -> None:
        async def hop(ids: list[str]) -> dict[str, Exception]:
            return await anyio.to_thread.run_sync(call_many, ids)

        super().__init__(hop, anyio.Semaphore(hops))
