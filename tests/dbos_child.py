"""A worker that runs a session's turns as DBOS workflows, for the kill tests: ``python -m
tests.dbos_child STORE SYSTEM_DB SESSION TURNS OUTBOX [control|approval]``.

Each turn the scripted model asks for ``send`` (unsafe: each run of its body is a line in
OUTBOX) and ``lookup`` (read), then answers. The worker first lets DBOS recover what a killed
worker left, then runs the turns not yet done; it prints ``turn N done`` after each. A test
kills it at a failpoint (``AGENT_SESSION_FAILPOINT``). With ``control``, the conversation is
kept in the OpenAI Agents SDK's ``SQLiteSession`` at STORE instead (each step adds its items),
the way a workflow without this library keeps it. With ``approval``, each ``send`` waits for
a person's approval."""

from __future__ import annotations

import os
import sys
from typing import Any

from dbos import DBOS

from tests.dbos_kit import lookup, reply_to, send

STORE, SYSTEM, SESSION, TURNS, OUTBOX = sys.argv[1:6]
CONTROL = sys.argv[6:] == ["control"]
APPROVAL = sys.argv[6:] == ["approval"]
os.environ["DBOS_TEST_OUTBOX"] = OUTBOX


if CONTROL:
    from tests.dbos_control import control_turn

    agent = None
else:
    from agent_session.engines.dbos_turns import DurableAgent, Reply, Tool

    def model(messages: list[Any]) -> Reply:
        kinds = [m["source"]["kind"] for m in messages]
        text, calls = reply_to(kinds[-1] == "user", kinds.count("user"))
        return Reply(text, tuple(calls))

    agent = DurableAgent(
        "kills",
        STORE,
        model,
        {"send": Tool(send, "unsafe", approval=APPROVAL), "lookup": Tool(lookup, "read")},
        model_name="scripted",
    )


def main() -> None:
    DBOS(
        config={
            "name": "agent-session-tests",
            "system_database_url": SYSTEM,
            "run_admin_server": False,
        }
    )
    DBOS.launch()  # (recovers the workflow a killed worker left)
    try:
        for n in range(1, int(TURNS) + 1):
            workflow = f"{SESSION}-turn-{n}"
            if DBOS.get_workflow_status(workflow) is not None:  # (recovered, or done)
                handle = DBOS.retrieve_workflow(workflow)
            elif CONTROL:
                from dbos import SetWorkflowID

                with SetWorkflowID(workflow):
                    handle = DBOS.start_workflow(control_turn, STORE, SESSION, f"task {n}")
            else:
                assert agent is not None
                handle = agent.start_turn(SESSION, f"task {n}", workflow_id=workflow)
            handle.get_result()
            print(f"turn {n} done", flush=True)
    finally:
        if agent is not None:
            agent.close()
        DBOS.destroy()


if __name__ == "__main__":
    main()
