"""How Kokoro sounds across OpenAI's ``speed`` range (0.25-4.0), by ear: pocketsphinx's word error
rate on the real int8 weights with af_heart, and each render's duration against speed 1.0.

OpenAI's route accepts its whole range and passes it to the model (docs/protocol.md#openai-
compatible-speech-api); the native routes keep 0.5-2.0. This records what a listener gets
beyond it::

    .venv-kokoro/bin/python -m bench.speeds [--out bench/results/speeds.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from voicestream.protocol import NATIVE_SAMPLE_RATE

from .windowing import REPO, VOICE, word_error_rate

SPEEDS = (0.25, 0.5, 1.0, 2.0, 3.0, 4.0)
SENTENCES = (  # 29 words, plain prose
    "The weather will be warm and sunny this afternoon.",
    "She opened the window and let the fresh air in.",
    "The meeting has been moved to next Thursday at ten.",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.speeds", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "speeds.json")
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "kokoro-82m-onnx")
    args = parser.parse_args(argv)
    from kokoro_server.engines import load_engine
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.model_dir import open_model_dir, style_for
    from kokoro_tools.packaged_weights import build_model_dir, installed_sources

    model = open_model_dir(build_model_dir(args.model_dir, sources=installed_sources(english=True)).root)
    engine, phonemizer, pack = load_engine(model), Phonemizer(), model.voices[VOICE]
    rows = []
    for speed in SPEEDS:
        seconds, errors = 0.0, []
        for text in SENTENCES:
            phonemes = phonemizer.phonemize(text, voice=VOICE)[0]
            audio = engine.synthesize(phonemes, style_for(pack, phonemes), speed).audio
            seconds += audio.size / NATIVE_SAMPLE_RATE
            errors.append(word_error_rate(text, audio))
        rows.append({"speed": speed, "audio_s": round(seconds, 2),
                     "wer": round(float(np.mean([e for e in errors if e is not None])), 3)})
    at_one = next(row["audio_s"] for row in rows if row["speed"] == 1.0)
    for row in rows:
        row["duration_vs_speed_1"] = round(row["audio_s"] / at_one, 3)
    result = {"voice": VOICE, "engine": engine.name, "sentences": list(SENTENCES), "speeds": rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for row in rows:
        print(f"speed {row['speed']:>4}: {row['audio_s']:6.2f} s ({row['duration_vs_speed_1']}x), WER {row['wer']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
