"""One jpd-like node of the DBOS fleet spike (docs/scale.md section 8, step 4).

A turn is a DBOS workflow (id = turn id): a model step that streams checkpoints with
`DBOS.write_stream` (one write per 0.5 s, never per token), then a tool step guarded by
a started marker kept in the application's own table (in jpd: the conversation log), so
a tool cut by a crash is reported, not run twice.

    node.py DB_URL run EXECUTOR TURN           run the turn here (the node that dies)
    node.py DB_URL follow-then-recover EXECUTOR TURN DEAD_EXECUTOR FLAG
        follow the turn's checkpoints live; once FLAG exists (the other node is dead),
        recover the dead executor's pending turns here and print the outcome as JSON
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import psycopg
from dbos import DBOS, DBOSConfig, SetWorkflowID

DB_URL = sys.argv[1]
APP_DB = DB_URL.replace("postgresql+psycopg://", "postgresql://")


def app_db() -> psycopg.Connection:
    return psycopg.connect(APP_DB, autocommit=True)


@DBOS.step()
def model_call(turn_id: str) -> str:
    # Streams "tokens"; only a checkpoint every 0.5 s crosses machines.
    text = ""
    for i in range(4):
        time.sleep(0.5)
        piece = f"part{i} "
        text += piece
        DBOS.write_stream("checkpoints", {"node": DBOS.executor_id, "text": piece})
    with app_db() as db:
        db.execute(
            "insert into jpd_calls(turn_id, what, node) values (%s, 'model', %s)",
            (turn_id, DBOS.executor_id),
        )
    return text


@DBOS.step()
def run_tool(turn_id: str, call_id: str) -> dict[str, object]:
    with app_db() as db:
        started = db.execute(
            "select node from jpd_tool_marks where call_id = %s", (call_id,)
        ).fetchone()
        if started is not None:
            # Started by an earlier execution that never finished: report, never re-run.
            return {
                "is_error": True,
                "interrupted": True,
                "content": f"Tool call was interrupted: the daemon stopped (on {started[0]}).",
            }
        db.execute(
            "insert into jpd_tool_marks(call_id, node) values (%s, %s)", (call_id, DBOS.executor_id)
        )
        db.execute(
            "insert into jpd_calls(turn_id, what, node) values (%s, 'tool', %s)",
            (turn_id, DBOS.executor_id),
        )
    time.sleep(60)  # a long build: the node is killed during it
    return {"is_error": False, "content": "built"}


@DBOS.workflow()
def turn(turn_id: str) -> dict[str, object]:
    answer = model_call(turn_id)
    result = run_tool(turn_id, "call_1")
    DBOS.write_stream("checkpoints", {"node": DBOS.executor_id, "text": "[tool done]"})
    DBOS.close_stream("checkpoints")
    return {"answer": answer, "tool": result, "finished_on": DBOS.executor_id}


def launch(executor: str) -> None:
    config: DBOSConfig = {
        "name": "jpd-spike",
        "system_database_url": DB_URL,
        "executor_id": executor,
        "application_version": "spike-1",
        "notification_listener_polling_interval_sec": 0.1,
        "log_level": "WARNING",
    }
    DBOS(config=config)
    DBOS.launch()
    with app_db() as db:
        db.execute("create table if not exists jpd_tool_marks(call_id text primary key, node text)")
        db.execute("create table if not exists jpd_calls(turn_id text, what text, node text)")


def main() -> None:
    role, executor, turn_id = sys.argv[2], sys.argv[3], sys.argv[4]
    launch(executor)
    if role == "run":
        with SetWorkflowID(turn_id):  # workflow id = turn id: starting twice is a no-op
            DBOS.start_workflow(turn, turn_id)  # runs until this node is killed
        while True:
            time.sleep(1)
    dead, flag = sys.argv[5], sys.argv[6]
    seen: list[dict[str, object]] = []

    def follow() -> None:
        for value in DBOS.read_stream(turn_id, "checkpoints", polling_interval_sec=0.1):
            seen.append(value)
            print(json.dumps({"followed": value}), flush=True)

    threading.Thread(target=follow, daemon=True).start()
    while not os.path.exists(flag):
        time.sleep(0.05)
    handles = DBOS._recover_pending_workflows([dead])
    outcome = [h.get_result() for h in handles]
    time.sleep(0.5)  # the follower reads the stream's end
    with app_db() as db:
        calls = db.execute(
            "select what, node from jpd_calls where turn_id = %s order by 1, 2", (turn_id,)
        ).fetchall()
    print(
        json.dumps(
            {
                "recovered": [h.get_workflow_id() for h in handles],
                "outcome": outcome,
                "followed": seen,
                "calls": calls,
            }
        ),
        flush=True,
    )
    DBOS.destroy()
    os._exit(0)


if __name__ == "__main__":
    main()
