"""The `claude` proposer: the LLM proposer (proposer.py) over the anthropic transport
(extra `llm`), labelled `claude`. `--proposer llm --transport anthropic` is the same
proposer under the label `llm:anthropic`."""

from __future__ import annotations

from .prompt import TOOL, tool_definition
from .proposer import LLMProposer
from .transports import AnthropicTransport, TransportSetupError

DEFAULT_MODEL = AnthropicTransport.DEFAULT_MODEL
ClaudeSetupError = TransportSetupError  # (the name earlier releases raised)

__all__ = ["TOOL", "ClaudeProposer", "ClaudeSetupError", "DEFAULT_MODEL", "tool_definition"]


class ClaudeProposer(LLMProposer):
    name = "claude"

    def __init__(self, model: str | None = None, client=None, max_tokens: int = 4096, **kw):
        kw.pop("transport", None)
        super().__init__(transport="anthropic", model=model, client=client,
                         max_tokens=max_tokens, label="claude", **kw)
