"""NsboxExecutor against the real smolagents CodeAgent, with real sandboxes.

The model is scripted (canned code steps): what is tested is the executor,
that every step runs in one nsbox session.
"""

from __future__ import annotations

from typing import Any, List

import pytest

pytest.importorskip("smolagents", reason="the adapters' venv (make python-adapters-test) has smolagents")

from smolagents import CodeAgent, tool  # noqa: E402
from smolagents.models import ChatMessage, MessageRole, Model  # noqa: E402
from smolagents.tools import Tool  # noqa: E402

from adapters_env import need_sandboxes  # noqa: E402
from nsbox.integrations.smolagents import NsboxExecutor, NsboxStepFailed, NsboxToolRefused  # noqa: E402


class ScriptedModel(Model):
    """Answers each step with the next canned code, as a model would write it."""

    def __init__(self, steps: List[str]) -> None:
        super().__init__(model_id="scripted")
        self.steps = list(steps)
        self.seen: List[Any] = []

    def generate(self, messages: Any, stop_sequences: Any = None, **kwargs: Any) -> ChatMessage:
        self.seen.append(messages)
        code = self.steps.pop(0)
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: next step.\n<code>\n{code}\n</code>")


def _agent(steps: List[str], executor: NsboxExecutor, tools: Any = ()) -> CodeAgent:
    return CodeAgent(tools=list(tools), model=ScriptedModel(steps), executor=executor, max_steps=len(steps), verbosity_level=0)


def _observations(agent: CodeAgent) -> List[str]:
    return [str(getattr(s, "observations", "") or "") for s in agent.memory.steps[1:]]


def test_two_steps_share_state_and_end_in_final_answer() -> None:
    need_sandboxes()
    ex = NsboxExecutor(policy="datasci", timeout_per_cell=20)
    with _agent(
        [
            "import pandas as pd\ndf = pd.DataFrame({'n': range(1, 11)})\nprint('rows', len(df))",
            "mean = float(df['n'].mean())\nprint('mean', mean)\nfinal_answer({'mean': mean, 'rows': len(df)})",
        ],
        ex,
    ) as agent:
        answer = agent.run("What is the mean of 1..10?")
        assert answer == {"mean": 5.5, "rows": 10}
        obs = _observations(agent)
        assert "rows 10" in obs[0] and "mean 5.5" in obs[1], obs
        sb = ex._own
        # Both steps were cells of one session, after the tools' definitions.
        assert sb is not None and sb.info().cells >= 3
    assert sb.closed and ex._own is None  # the agent's cleanup closed it


def test_state_persists_from_one_run_to_the_next() -> None:
    need_sandboxes()
    ex = NsboxExecutor(policy="default")
    with _agent(["total = 40\nfinal_answer(total)"], ex) as agent:
        assert agent.run("first") == 40
        agent.model.steps = ["final_answer(total + 2)"]
        assert agent.run("second", reset=False) == 42


def test_tools_run_inside_the_sandbox() -> None:
    need_sandboxes()

    @tool
    def add(a: int, b: int) -> int:
        """Adds two numbers.

        Args:
            a: the first number
            b: the second number
        """
        import os  # the sandbox's os: its uid, not the host's

        return a + b + (0 if os.getuid() != 0 else 1000)

    ex = NsboxExecutor(policy="default")
    with _agent(["print(add(20, 22))\nfinal_answer(add(1, 1))"], ex, tools=[add]) as agent:
        assert agent.run("add") == 2
        assert "42" in _observations(agent)[0]


def test_additional_args_cross_as_json() -> None:
    need_sandboxes()
    ex = NsboxExecutor(policy="default")
    with _agent(["final_answer(sum(numbers) * factor)"], ex) as agent:
        assert agent.run("sum", additional_args={"numbers": [1, 2, 3], "factor": 7}) == 42
    with _agent(["final_answer(1)"], NsboxExecutor(policy="default")) as agent:
        with pytest.raises(NsboxToolRefused, match="variable 'when' \\(object\\) cannot cross into the sandbox"):
            agent.run("x", additional_args={"when": object()})


def test_failed_step_is_shown_to_the_model() -> None:
    need_sandboxes()
    ex = NsboxExecutor(policy="default")
    with _agent(["print('before')\nx = 1 / 0", "import socket", "final_answer('recovered')"], ex) as agent:
        assert agent.run("fail first") == "recovered"
        errors = [str(s.error) for s in agent.memory.steps[1:3]]
        assert "status: error" in errors[0] and "ZeroDivisionError: division by zero" in errors[0], errors
        assert "before" in errors[0]
        assert "status: policy_violation" in errors[1] and "import of 'socket' is not allowed" in errors[1]
        # What the model was shown on its next turn carries the error.
        shown = str(agent.model.seen[1])
        assert "ZeroDivisionError" in shown


def test_an_ended_session_is_replaced_with_the_tools() -> None:
    need_sandboxes()

    @tool
    def double(x: int) -> int:
        """Doubles a number.

        Args:
            x: the number
        """
        return 2 * x

    ex = NsboxExecutor(policy="default")
    steps = ["kept = 1\nprint('set')", "import os\nos._exit(0)", "print(double(21))\nprint('kept' in globals())", "final_answer('done')"]
    with _agent(steps, ex, tools=[double]) as agent:
        assert agent.run("survive") == "done"
        obs = _observations(agent)
        assert "The sandbox session ended with this step" in obs[1], obs
        assert "this step ran in a new one" in obs[2] and "42" in obs[2] and "False" in obs[2], obs


def test_a_step_that_ends_the_session_in_error() -> None:
    need_sandboxes()
    ex = NsboxExecutor(policy="default")
    with _agent(["v = 1", "import os\nos._exit(3)", "print('v' in globals())\nfinal_answer('ok')"], ex) as agent:
        assert agent.run("again") == "ok"
        assert "The session ended with this call" in str(agent.memory.steps[2].error)
        assert "this step ran in a new one" in _observations(agent)[2]


def test_refused_tools() -> None:
    ex = NsboxExecutor(policy="default")
    # A managed agent runs on the host: refused before any sandbox starts.
    with pytest.raises(NsboxToolRefused, match="'helper' is a managed agent \\(object\\), not a tool"):
        ex.send_tools({"helper": object()})
    assert ex._own is None

    need_sandboxes()

    class Fetch(Tool):
        name = "fetch"
        description = "Fetches a URL."
        inputs = {"url": {"type": "string", "description": "the URL"}}
        output_type = "string"

        def forward(self, url: str) -> str:
            import socket

            return str(socket.getaddrinfo(url, 80))

    with pytest.raises(NsboxToolRefused) as e:
        with _agent(["final_answer(fetch('example.org'))"], NsboxExecutor(policy="default"), tools=[Fetch()]) as agent:
            agent.run("fetch")
    assert "tools (fetch, final_answer) could not be defined in the sandbox" in str(e.value)
    assert "import of 'socket' is not allowed by the policy" in str(e.value)


def test_final_answer_value_that_is_not_json() -> None:
    need_sandboxes()
    with _agent(["final_answer({1, 2})"], NsboxExecutor(policy="default")) as agent:
        assert agent.run("a set") == "{1, 2}"  # its repr


def test_timeout_is_a_failed_step() -> None:
    need_sandboxes()
    ex = NsboxExecutor(policy="default", timeout_per_cell=1)
    try:
        with pytest.raises(NsboxStepFailed, match="status: timeout \\(the code ran past its time limit"):
            ex("while True:\n    pass")
        assert ex("print('alive')").logs == "alive\n"  # interrupted, and the session lives
    finally:
        ex.cleanup()
