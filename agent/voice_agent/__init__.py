"""A Strands voice agent on Bedrock AgentCore Runtime that speaks while it writes.

``python -m voice_agent`` serves it; :func:`voice_agent.app.create_app` builds the app for tests.
"""
