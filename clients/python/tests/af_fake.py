"""A fake chat client for the Agent Framework tests: no network, its answers
a function of the history it is sent, so a test sees what history the agent
loaded. "add A B" makes it call the add tool; a tool's result makes it
answer with the sum, an image and usage; anything else is echoed with the
number of user messages it saw.

    python -m tests.af_fake URL SESSION_JSON TEXT [kill]

runs one turn of the agent on the session restored from SESSION_JSON
(AgentSession.to_dict), prints the answer and the session's new JSON, and
with kill SIGKILLs itself once the turn returned, before anything else."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from agent_framework import (
    Agent,
    AgentSession,
    BaseChatClient,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
    tool,
)

from loomthreads.agent_framework import LoomHistoryProvider

PNG = b"\x89PNG\r\n\x1a\n"


@tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


class FakeChatClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """FakeChatClient answers from the messages it is given."""

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kwargs: Any
    ) -> Awaitable[ChatResponse]:
        return self._answer(list(messages))

    async def _answer(self, messages: list[Message]) -> ChatResponse:
        last = messages[-1]
        users = [m for m in messages if m.role == "user"]
        results = [c for c in last.contents if c.type == "function_result"]
        if last.role == "tool" and results:
            out = Message(
                role="assistant",
                contents=[
                    Content.from_text(f"The sum is {results[0].result}."),
                    Content.from_data(data=PNG, media_type="image/png"),
                    Content.from_usage(
                        usage_details={"input_token_count": 10, "output_token_count": 5, "total_token_count": 15}
                    ),
                ],
            )
            return ChatResponse(messages=[out])
        words = (last.text or "").split()
        if len(words) == 3 and words[0] == "add":
            call = Content.from_function_call(
                call_id=f"call_{len(users)}", name="add", arguments={"a": int(words[1]), "b": int(words[2])}
            )
            return ChatResponse(messages=[Message(role="assistant", contents=[call])])
        return ChatResponse(messages=[Message(role="assistant", contents=[f"You said: {last.text} ({len(users)})"])])


def agent(history: LoomHistoryProvider) -> Agent[Any]:
    return Agent(client=FakeChatClient(), tools=[add], context_providers=[history], name="adder")


async def _main(url: str, session_json: str, text: str, kill: bool) -> None:
    history = LoomHistoryProvider(url)
    session = AgentSession.from_dict(json.loads(session_json))
    resp = await agent(history).run(text, session=session)
    if kill:
        os.kill(os.getpid(), signal.SIGKILL)
    print(resp.text)
    print(json.dumps(session.to_dict()))


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], sys.argv[2], sys.argv[3], len(sys.argv) > 4 and sys.argv[4] == "kill"))
