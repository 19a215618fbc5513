"""Shared by the Kokoro container, the agent and the CLIs: wire protocol, sentence chunker, clients.

Imports nothing of the rest of the project, and nothing beyond the standard library in its core.
"""
