"""NsboxExecutor against the real smolagents CodeAgent, with real sandboxes.

The model is scripted (canned code steps): what is tested is the executor,
that every step runs in one nsbox session.
"""

from __future__ import annotations

import unittest
from typing import Any, List, Sequence

from .adapters_env import adapters_venv_only, need_sandboxes

adapters_venv_only()

from smolagents import CodeAgent, tool  # noqa: E402
from smolagents.models import ChatMessage, MessageRole, Model  # noqa: E402
from smolagents.tools import Tool  # noqa: E402

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


def _agent(steps: List[str], executor: NsboxExecutor, tools: Sequence[Any] = ()) -> CodeAgent:
    return CodeAgent(
        tools=list(tools), model=ScriptedModel(steps), executor=executor, max_steps=len(steps), verbosity_level=-1
    )


def _observations(agent: CodeAgent) -> List[str]:
    return [str(getattr(s, "observations", "") or "") for s in agent.memory.steps[1:]]


@tool
def add(a: int, b: int) -> int:
    """Adds two numbers.

    Args:
        a: the first number
        b: the second number
    """
    import os  # the sandbox's os: its uid is not root, the host's is

    return a + b + (0 if os.getuid() != 0 else 1000)


@tool
def double(x: int) -> int:
    """Doubles a number.

    Args:
        x: the number
    """
    return 2 * x


class Fetch(Tool):
    name = "fetch"
    description = "Fetches a URL."
    inputs = {"url": {"type": "string", "description": "the URL"}}
    output_type = "string"

    def forward(self, url: str) -> str:
        import socket

        return str(socket.getaddrinfo(url, 80))


class RefusalTest(unittest.TestCase):
    def test_managed_agent_refused_before_any_sandbox(self) -> None:
        ex = NsboxExecutor(policy="default")
        with self.assertRaisesRegex(NsboxToolRefused, r"'helper' is a managed agent \(object\), not a tool"):
            ex.send_tools({"helper": object()})
        self.assertIsNone(ex._own)


class ExecutorTest(unittest.TestCase):
    def setUp(self) -> None:
        need_sandboxes()

    def test_two_steps_share_state_and_end_in_final_answer(self) -> None:
        ex = NsboxExecutor(policy="datasci", timeout_per_cell=20)
        steps = [
            "import pandas as pd\ndf = pd.DataFrame({'n': range(1, 11)})\nprint('rows', len(df))",
            "mean = float(df['n'].mean())\nprint('mean', mean)\nfinal_answer({'mean': mean, 'rows': len(df)})",
        ]
        with _agent(steps, ex) as agent:
            self.assertEqual(agent.run("What is the mean of 1..10?"), {"mean": 5.5, "rows": 10})
            obs = _observations(agent)
            self.assertIn("rows 10", obs[0])
            self.assertIn("mean 5.5", obs[1])
            sb = ex._own
            # Both steps were cells of one session, after the tools' definitions.
            self.assertIsNotNone(sb)
            self.assertGreaterEqual(sb.info().cells, 3)
        self.assertTrue(sb.closed)  # the agent's cleanup closed it
        self.assertIsNone(ex._own)

    def test_state_persists_from_one_run_to_the_next(self) -> None:
        with _agent(["total = 40\nfinal_answer(total)"], NsboxExecutor(policy="default")) as agent:
            self.assertEqual(agent.run("first"), 40)
            agent.model.steps = ["final_answer(total + 2)"]
            self.assertEqual(agent.run("second", reset=False), 42)

    def test_tools_run_inside_the_sandbox(self) -> None:
        with _agent(["print(add(20, 22))\nfinal_answer(add(1, 1))"], NsboxExecutor(policy="default"), tools=[add]) as agent:
            self.assertEqual(agent.run("add"), 2)
            self.assertIn("42", _observations(agent)[0])

    def test_tool_the_policy_refuses(self) -> None:
        with self.assertRaises(NsboxToolRefused) as e:
            with _agent(["final_answer(fetch('example.org'))"], NsboxExecutor(policy="default"), tools=[Fetch()]) as agent:
                agent.run("fetch")
        self.assertIn("tools (fetch, final_answer) could not be defined in the sandbox", str(e.exception))
        self.assertIn("import of 'socket' is not allowed by the policy", str(e.exception))

    def test_additional_args_cross_as_json(self) -> None:
        with _agent(["final_answer(sum(numbers) * factor)"], NsboxExecutor(policy="default")) as agent:
            self.assertEqual(agent.run("sum", additional_args={"numbers": [1, 2, 3], "factor": 7}), 42)
        with _agent(["final_answer(1)"], NsboxExecutor(policy="default")) as agent:
            with self.assertRaisesRegex(NsboxToolRefused, r"variable 'when' \(object\) cannot cross into the sandbox"):
                agent.run("x", additional_args={"when": object()})

    def test_failed_step_is_shown_to_the_model(self) -> None:
        steps = ["print('before')\nx = 1 / 0", "import socket", "final_answer('recovered')"]
        with _agent(steps, NsboxExecutor(policy="default")) as agent:
            self.assertEqual(agent.run("fail first"), "recovered")
            errors = [str(s.error) for s in agent.memory.steps[1:3]]
            self.assertIn("status: error", errors[0])
            self.assertIn("ZeroDivisionError: division by zero", errors[0])
            self.assertIn("before", errors[0])
            self.assertIn("status: policy_violation", errors[1])
            self.assertIn("import of 'socket' is not allowed", errors[1])
            # What the model was shown on its next turn carries the error.
            self.assertIn("ZeroDivisionError", str(agent.model.seen[1]))

    def test_an_ended_session_is_replaced_with_the_tools(self) -> None:
        steps = [
            "kept = 1\nprint('set')",
            "import os\nos._exit(0)",
            "print(double(21))\nprint('kept' in globals())",
            "final_answer('done')",
        ]
        with _agent(steps, NsboxExecutor(policy="default"), tools=[double]) as agent:
            self.assertEqual(agent.run("survive"), "done")
            obs = _observations(agent)
            self.assertIn("The sandbox session ended with this step", obs[1])
            for want in ("this step ran in a new one", "42", "False"):
                self.assertIn(want, obs[2])

    def test_a_step_that_ends_the_session_in_error(self) -> None:
        steps = ["v = 1", "import os\nos._exit(3)", "print('v' in globals())\nfinal_answer('ok')"]
        with _agent(steps, NsboxExecutor(policy="default")) as agent:
            self.assertEqual(agent.run("again"), "ok")
            self.assertIn("The session ended with this call", str(agent.memory.steps[2].error))
            self.assertIn("this step ran in a new one", _observations(agent)[2])

    def test_final_answer_value_that_is_not_json(self) -> None:
        with _agent(["final_answer({1, 2})"], NsboxExecutor(policy="default")) as agent:
            self.assertEqual(agent.run("a set"), "{1, 2}")  # its repr

    def test_timeout_is_a_failed_step(self) -> None:
        ex = NsboxExecutor(policy="default", timeout_per_cell=1)
        try:
            with self.assertRaisesRegex(NsboxStepFailed, r"status: timeout \(the code ran past its time limit"):
                ex("while True:\n    pass")
            self.assertEqual(ex("print('alive')").logs, "alive\n")  # interrupted, and the session lives
        finally:
            ex.cleanup()


if __name__ == "__main__":
    unittest.main()
