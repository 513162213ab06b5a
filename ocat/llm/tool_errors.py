"""What a provider's refusal of a request with tools says: that the model or server takes no tools
at all (the turn asks again without them, and the refusal is kept), that it refuses one tool's
definition (that tool is left out for the session), or neither (the failure is the turn's).

Pure functions of the error's text, read the way providers word them (docs/tools.md, "When the
model refuses tools"). A message that only mentions a function is neither: OpenAI's
context-length error counts "tokens ... in the functions", and a schema error names one tool.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

# How providers and servers say the model or server takes no tools, whatever the status:
#   Ollama: "registry.ollama.ai/library/gemma2:2b does not support tools" (400)
#   OpenAI: "Unsupported parameter: 'tools' is not supported with this model." (400)
#   DeepSeek: "deepseek-reasoner does not support Function Calling" (400)
#   vLLM: "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set" (400)
#   llama.cpp: "tools param requires --jinja flag" (500), older "Unsupported param: tools" (500)
#   litellm: "... does not support parameters: ['tools', 'tool_choice'], for model=..."
_WHAT = r"(?:tools|tool use|tool calls|tool calling|function calling|functions|tool_choice)"
_REFUSALS = re.compile(
    rf"(?:does not|doesn't|do not|don't) support {_WHAT}\b"
    rf"|\b{_WHAT}'?\"? (?:is|are) not supported"
    r"|unsupported param(?:eter)?s?:? ?\[?'?\"?(?:tools|tool_choice)\b"
    r"|does not support parameters?:? ?\[?'?\"?(?:tools|tool_choice)\b"
    r"|tool choice requires --enable-auto-tool-choice"
    r"|tools param requires --jinja",
    re.IGNORECASE,
)

# Where a provider points at one tool of the request: OpenAI's `tools[2].function.parameters`,
# Anthropic's `tools.2.custom.input_schema`, Gemini's `function_declarations[2]`.
_INDEX = re.compile(r"\b(?:function_declarations|tools)(?:\[(\d+)\]|\.(\d+)\.)")
# OpenAI's (and DeepSeek's, Groq's) schema error names the function.
_NAMED = re.compile(r"(?:invalid schema for function|function) ['\"]([A-Za-z0-9_.-]{1,64})['\"]", re.IGNORECASE)


def refuses_tools(text: str) -> bool:
    """Whether a provider's error says the model or server takes no tools at all."""
    return _REFUSALS.search(text) is not None


def refused_tool(text: str, param: str | None, offered: Sequence[dict[str, Any]]) -> str | None:
    """The name of the one offered tool a provider's error is about (its definition refused: a
    schema it cannot read, a name it does not take), or None when it names none of them."""
    names = [str(tool.get("function", {}).get("name", "")) for tool in offered]
    named = _NAMED.search(text)
    if named and named.group(1) in names:
        return named.group(1)
    for where in (param or "", text):
        index = _INDEX.search(where)
        if index is None:
            continue
        number = int(index.group(1) or index.group(2))
        # Gemini puts every function under tools[0]: its function_declarations index is the one.
        inner = re.search(r"function_declarations\[(\d+)\]", where)
        number = int(inner.group(1)) if inner else number
        if 0 <= number < len(names) and ("schema" in text.lower() or "invalid" in text.lower()):
            return names[number]
    return None
