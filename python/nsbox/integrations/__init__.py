"""Adapters between nsbox and agent frameworks, each in its own module.

- `nsbox.integrations.langchain`: `NsboxPythonTool`, a LangChain tool
  (needs `langchain-core`).
- `nsbox.integrations.smolagents`: `NsboxExecutor`, a smolagents
  `CodeAgent` executor (needs `smolagents`).

The frameworks are optional: nothing here is imported by `import nsbox`,
and each module says which package to install when its framework is
missing. The plain function-calling tool (`nsbox.tool_schema`,
`nsbox.handle_tool_call`) needs no framework: it is `nsbox.tools`.
"""
