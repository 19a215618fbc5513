"""Registers the agent tests' fixtures; they live in agent_harness.py so tests can import its
helpers under a name no other test directory uses."""

from agent_harness import agent, kokoro_server, tts_url  # noqa: F401 (pytest fixtures)
