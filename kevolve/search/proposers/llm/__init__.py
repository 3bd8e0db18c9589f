"""Proposers that ask a language model: proposer.py (one parser, one retry and fall-back
policy), transports.py (anthropic, OpenAI-compatible HTTP, any command), prompt.py (what is
sent), similar.py (the archive's best traces of similar ops), claude.py (the `claude`
name: the proposer over anthropic)."""
