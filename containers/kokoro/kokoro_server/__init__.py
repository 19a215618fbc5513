"""Kokoro-82M behind SageMaker's real-time contract: /ping, /invocations, bidirectional WebSocket."""
