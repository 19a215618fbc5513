"""Voice-agent framework plugins over the bidirectional protocol, each behind its own extra.

- :mod:`voicestream.integrations.livekit` (``pip install 'voicestream[livekit]'``): ``KokoroTTS``,
  a LiveKit Agents ``tts.TTS`` that streams.
- :mod:`voicestream.integrations.pipecat` (``pip install 'voicestream[pipecat]'``):
  ``KokoroTTSService``, a pipecat TTS service.

Both are thin adapters over :class:`voicestream.clients.TtsSession` (a local server's WebSocket or a
SageMaker endpoint's bidirectional stream); importing this package imports neither framework.
"""
