"""Proposers that ask a language model: claude.py (the client and its retries), prompt.py
(what is sent), similar.py (the archive's best traces of similar ops, sent as examples)."""
