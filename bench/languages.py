"""Kokoro's nine languages through the real int8 model: what the model is sent, and how long it speaks.

No offline recognizer for Spanish, French, Hindi, Italian, Portuguese, Japanese or Chinese ships
its model in a PyPI package (pocketsphinx's is US English; vosk's models are downloaded, the only
one packaged is Korean), so each language is checked by what reaches the model instead: one fixed
sentence per language, spoken by one of its voices through the server's own Synthesizer, must send
the model exactly kokoro's own reading (``KPipeline(lang_code, model=False)``) and not the English
one; its audio's seconds per character are recorded beside the English voice's as a sanity row.
English is also judged by ear (pocketsphinx word error rate).

``python -m bench.languages [--model-dir DIR]`` writes bench/results/languages.json
(docs/languages.md reads it); tests/kokoro/test_languages_real.py runs the same function per language.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# One sentence per language and a voice of it. The English voice's row is the sanity baseline.
SENTENCES: dict[str, tuple[str, str]] = {
    "a": ("af_heart", "The weather is lovely today, so we are going to the park."),
    "b": ("bf_emma", "The weather is lovely today, so we are going to the park."),
    "e": ("ef_dora", "Hoy hace un día precioso, así que vamos a ir al parque."),
    "f": ("ff_siwis", "Il fait très beau aujourd'hui, alors nous allons au parc."),
    "h": ("hf_alpha", "आज मौसम बहुत अच्छा है, इसलिए हम पार्क जा रहे हैं।"),
    "i": ("if_sara", "Oggi è una bellissima giornata, quindi andiamo al parco."),
    "j": ("jf_alpha", "今日はとても良い天気なので、公園に行きます。"),
    "p": ("pf_dora", "Hoje está um dia lindo, então nós vamos ao parque."),
    "z": ("zf_xiaobei", "今天天气很好，所以我们去公园。"),
}
RESULTS = Path(__file__).resolve().parent / "results" / "languages.json"
# The packages the other languages' G2P added to the container (containers/kokoro/requirements.txt).
G2P_PACKAGES = ("fugashi", "unidic-lite", "mojimoji", "pyopenjtalk-ndy", "jieba", "pypinyin", "cn2an", "proces",
                "ordered-set")
DEFAULT_MODEL_DIR = Path("models/kokoro-82m-onnx")


class Recorder:
    """The real engine, noting the phonemes of every job it begins (what the model is sent)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.sent: list[str] = []

    def begin(self, phonemes: str, *args: Any, **kwargs: Any) -> Any:
        self.sent.append(phonemes)
        return self._engine.begin(phonemes, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


@dataclass(frozen=True, kw_only=True)
class Spoken:
    """One sentence as the server speaks it: the phonemes its model jobs were sent, the audio, the words."""

    sent: list[str]
    audio: np.ndarray
    words: list[Any]  # kokoro_server.words.WordTiming


def speak(model: Any, engine: Any, text: str, *, voice: str, lang: str | None = None) -> Spoken:
    """``text`` through the server's Synthesizer (G2P, windows, word timings) on the real engine."""
    from kokoro_server.scheduler import Scheduler
    from kokoro_server.speech import Speech
    from kokoro_server.synth import Synthesizer
    from voicestream.chunker import iter_sentences

    async def run() -> Spoken:
        recorder = Recorder(engine)
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        synth = Synthesizer(engine=recorder, voices=model.voices, scheduler=scheduler,
                            default_voice=voice, vocab=model.vocab)
        try:
            chosen = synth.resolve_language(voice, lang)
            speech = Speech(synth, owner="bench", pieces=iter_sentences(text), text=text, voice=voice, speed=1.0,
                            lang=chosen)
            windows = [window async for window in speech]
        finally:
            await scheduler.stop()
            synth.close()
        audio = np.concatenate([w.synthesis.audio for w in windows]) if windows else np.zeros(0, np.float32)
        return Spoken(sent=recorder.sent, audio=audio, words=[w for window in windows for w in window.words])

    return asyncio.run(run())


def kokoro_reading(text: str, lang: str) -> str:
    """kokoro's own G2P of ``text`` for ``lang`` (``KPipeline(model=False)``), its chunks joined."""
    from kokoro import KPipeline

    pipeline = KPipeline(lang_code=lang, repo_id="hexgrad/Kokoro-82M", model=False)
    return " ".join(result.phonemes for result in pipeline(text, voice=None, split_pattern=None) if result.phonemes)


def row(model: Any, engine: Any, lang: str) -> dict[str, Any]:
    from bench.hearing import recognise, wer
    from voicestream.protocol import LANGUAGES, NATIVE_SAMPLE_RATE

    voice, text = SENTENCES[lang]
    started = time.perf_counter()
    spoken = speak(model, engine, text, voice=voice)
    elapsed = time.perf_counter() - started
    sent = " ".join(spoken.sent)
    expected, english = kokoro_reading(text, lang), kokoro_reading(text, "a")
    seconds = len(spoken.audio) / NATIVE_SAMPLE_RATE
    out: dict[str, Any] = {
        "lang": lang, "language": LANGUAGES[lang], "voice": voice, "text": text, "chars": len(text),
        "phonemes_sent": sent, "kokoro_phonemes": expected, "english_phonemes": english,
        "sent_equals_kokoro": sent == expected, "sent_differs_from_english": sent != english,
        "audio_s": round(seconds, 3), "s_per_char": round(seconds / len(text), 4),
        "synthesis_s": round(elapsed, 2), "words": [{"text": w.text, "start_ms": w.start_ms, "end_ms": w.end_ms,
                                                     "char_start": w.char_start, "char_end": w.char_end}
                                                    for w in spoken.words],
    }
    if lang in ("a", "b"):  # pocketsphinx (US English) judges these by ear
        out["pocketsphinx_wer"] = round(wer(recognise(spoken.audio), text), 3)
    return out


def installed_sizes(names: tuple[str, ...] = G2P_PACKAGES) -> dict[str, dict[str, Any]]:
    """Each installed distribution's version and disk usage as du counts it (its files' blocks)."""
    import importlib.metadata

    sizes: dict[str, dict[str, Any]] = {}
    for name in names:
        dist = importlib.metadata.distribution(name)
        blocks = sum(path.stat().st_blocks for file in dist.files or []
                     if (path := Path(str(file.locate()))).is_file())
        sizes[name] = {"version": dist.version, "du_mib": round(blocks * 512 / 2**20, 1)}
    return sizes


def _rss_mib() -> float:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def reader_costs() -> dict[str, dict[str, float]]:
    """What each language's reader costs the first time it is used in a process (the server pays
    it at warm-up): seconds to read its greeting, and the process's resident memory growth."""
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.languages import READERS

    phonemizer, costs = Phonemizer(), {}
    for code, reader in READERS.items():
        before, started = _rss_mib(), time.perf_counter()
        phonemizer.phonemize(reader.greeting, voice="af_heart", lang=code)
        costs[code] = {"first_use_s": round(time.perf_counter() - started, 2),
                       "rss_growth_mib": round(_rss_mib() - before, 1)}
    return costs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.languages", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=DEFAULT_MODEL_DIR)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    from kokoro_server.engines import load_engine
    from kokoro_server.model_dir import open_model_dir

    costs = reader_costs()  # first, in a process that has read nothing yet
    model = open_model_dir(args.model_dir)
    engine = load_engine(model)
    rows = [row(model, engine, lang) for lang in SENTENCES]
    english = rows[0]["s_per_char"]
    for item in rows:
        item["s_per_char_vs_english"] = round(item["s_per_char"] / english, 2)
    sizes = installed_sizes()
    record: dict[str, Any] = {
        "command": "python -m bench.languages", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {platform.python_version()}", "model_dir": str(args.model_dir),
        "weights": model.manifest.get("weights") if hasattr(model, "manifest") else None, "rows": rows,
        "g2p_packages": sizes, "g2p_packages_du_mib": round(sum(p["du_mib"] for p in sizes.values()), 1),
        "reader_first_use": costs,
    }
    args.out.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    for item in rows:
        print(f"{item['lang']} {item['voice']:<11} sent==kokoro {item['sent_equals_kokoro']!s:<5} "
              f"!=english {item['sent_differs_from_english']!s:<5} {item['audio_s']:5.2f} s "
              f"{item['s_per_char']:.3f} s/char ({item['s_per_char_vs_english']:.2f}x English)"
              + (f" WER {item['pocketsphinx_wer']}" if "pocketsphinx_wer" in item else ""))
    print(f"G2P packages: {record['g2p_packages_du_mib']} MiB installed ({record['g2p_packages']})")
    print(f"first use of each reader: {costs}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
