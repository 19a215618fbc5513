"""Registers the agent tests' fixtures; they live in agent_harness.py so other test directories
(tests/cli) can use them too."""

from agent_harness import agent, browser, tts_url  # noqa: F401 (pytest fixtures)
