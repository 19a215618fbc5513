"""Registers the agent tests' fixtures; they live in agent_harness.py so tests can import its
helpers under a name no other test directory uses."""

from agent_harness import agent, tiny_model_dir, tts_url  # noqa: F401 (pytest fixtures)
