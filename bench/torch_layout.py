"""What each of the torch engine's time-major rewrites saves on the CPU (engines/time_major.py).

    .venv-kokoro/bin/python -m bench.torch_layout --model-dir models/bench-tiny \
        --out bench/results/torch_layout-tiny.json

One sentence (by default the 35-word one, bench/engine_vs_loop.py's LONG), phonemized by the
server's G2P, voice af_heart. Each variant is kokoro's KModel from the directory with the engine's
exact rewrites (torch_inference.for_inference), and then:

* ``kokoro``: nothing more: kokoro's channel-major layout;
* ``convolutions``: the decoder's Conv1d and ConvTranspose1d laid out time-major;
* ``adain``: those and its AdaIN1d as one batch norm;
* ``engine``: those and the vocoder's residual blocks with Snake in place (time_major.REWRITES):
  what TorchEngine runs on a CPU.

Every variant decodes the same inputs (the decoder's, captured from one forward: the front is the
same for all and is not timed), seeded alike, on this process's one thread as the engine does;
rounds rotate the order. On the device the server would pick (``KOKORO_DEVICE``, else CUDA where
torch sees it: bench/gpu.sh's ``LAYOUT=1`` asks whether the rewrite would help a GPU, where the
engine does not apply it). Per variant: the median seconds, that over kokoro's, and how far its audio
is from kokoro's (``error_db``: the error's energy in dB below the signal's, audio_metrics.snr_db).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .audio_metrics import snr_db
from .onnx_lanes import REPO, one_sentence_args, one_sentence_record

VARIANTS = ("kokoro", "convolutions", "adain", "engine")


def rewrites(variant: str) -> Mapping[type, Any]:
    """The time-major rewrites a variant applies (time_major.to_time_major's ``rewrites``)."""
    import torch
    from kokoro.istftnet import AdaIN1d

    from kokoro_server.engines.time_major import REWRITES

    kinds = {"kokoro": (), "convolutions": (torch.nn.Conv1d, torch.nn.ConvTranspose1d),
             "adain": (torch.nn.Conv1d, torch.nn.ConvTranspose1d, AdaIN1d), "engine": tuple(REWRITES)}[variant]
    return {kind: REWRITES[kind] for kind in kinds}


def decoders_and_inputs(model_dir: Path, text: str, device: str) -> tuple[dict[str, Any], tuple[Any, ...], int]:
    """Each variant's decoder on ``device``, the decoder's inputs for ``text`` and the sentence's frames."""
    import torch

    from kokoro_server.engines.time_major import to_time_major
    from kokoro_server.engines.torch_engine import build_kmodel, load_checkpoint_strictly
    from kokoro_server.engines.torch_inference import for_inference
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.model_dir import open_model_dir, style_for

    if device == "cpu":
        torch.set_flush_denormal(True)  # as the engine does on a CPU
    model = open_model_dir(model_dir)
    (phonemes,) = Phonemizer().phonemize(text, voice="af_heart")
    ref_s = torch.from_numpy(style_for(model.voices["af_heart"], phonemes)).reshape(1, -1).to(device)
    decoders: dict[str, Any] = {}
    for variant in VARIANTS:
        kmodel = build_kmodel(model.config)
        load_checkpoint_strictly(kmodel, model.weights)
        for_inference(kmodel)
        to_time_major(kmodel.decoder, rewrites(variant))
        decoders[variant] = kmodel.eval().to(device).decoder
    captured: list[tuple[Any, ...]] = []
    hook = kmodel.decoder.register_forward_pre_hook(lambda module, args: captured.append(args))
    with torch.inference_mode():
        kmodel(phonemes, ref_s, 1.0)
    hook.remove()
    (inputs,) = captured
    return decoders, inputs, int(inputs[0].shape[2])


def measure(model_dir: Path, rounds: int, text: str) -> dict[str, Any]:
    import torch

    from kokoro_server.engines.torch_engine import pick_device

    device = pick_device(os.environ.get("KOKORO_DEVICE"))
    decoders, inputs, frames = decoders_and_inputs(model_dir, text, device)

    def decode(variant: str) -> tuple[float, np.ndarray]:
        torch.manual_seed(0)  # the vocoder draws noise: every variant the same draws
        began = time.perf_counter()
        with torch.inference_mode():
            audio = decoders[variant](*inputs)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
        return time.perf_counter() - began, audio.cpu().numpy().reshape(-1)

    heard = {variant: decode(variant)[1] for variant in VARIANTS}  # also the warm-up
    seconds: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for round_ in range(rounds):
        for variant in VARIANTS[round_ % len(VARIANTS):] + VARIANTS[:round_ % len(VARIANTS)]:
            seconds[variant].append(round(decode(variant)[0], 4))
    kokoro = heard["kokoro"]
    rows = [{"variant": variant, "median_s": round(statistics.median(seconds[variant]), 4),
             "over_kokoro": round(statistics.median(seconds[variant]) / statistics.median(seconds["kokoro"]), 3),
             "error_db": None if variant == "kokoro" else round(snr_db(kokoro, heard[variant]), 1)}
            for variant in VARIANTS]
    return {"frames": frames, "audio_s": round(len(kokoro) / 24000, 3), "device": device,
            "threads": torch.get_num_threads(),
            "rows": rows, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    args = one_sentence_args("bench.torch_layout", __doc__, argv, rounds=5, model_dir=REPO / "models" / "bench-tiny")
    return one_sentence_record("bench.torch_layout", "kokoro's torch decoder over one sentence in kokoro's layout and "
                               "with each time-major rewrite; medians of the rounds", args, argv,
                               measure(args.model_dir, args.rounds, args.text), ("frames", "rows"))


if __name__ == "__main__":
    raise SystemExit(main())
