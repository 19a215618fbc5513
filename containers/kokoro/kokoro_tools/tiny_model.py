"""Write a tiny random-weight Kokoro model directory: same layout as the real one, built with the
real ``KModel`` class, small enough to synthesize a sentence in well under a second on a CPU.

Usage: ``python -m kokoro_tools.tiny_model DIR`` (``make tiny-model DIR=...``). It speaks noise,
not words: use it to test plumbing, never quality. No weight file is ever committed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from kokoro_server.engines.torch_engine import COMPONENTS, build_kmodel

# StyleTTS 2's symbol table, which Kokoro's 178-token vocabulary is drawn from: padding,
# punctuation, ASCII letters, then IPA. Ids are positions; every misaki phoneme has one.
_PAD = "$"
_PUNCTUATION = ';:,.!?¡¿—…"«»“” '
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_IPA = (
    "ɑɐɒæɓʙβɔɕçɗɖðʤəɘɚɛɜɝɞɟʄɡɠɢʛɦɧħɥʜɨɪʝɭɬɫɮʟɱɯɰŋɳɲɴøɵɸθœɶʘɹɺɾɻʀʁɽʂʃʈʧʉʊʋⱱʌɣɤʍχʎʏʑʐʒʔʡʕʢǀǁǂǃ"
    "ˈˌːˑʼʴʰʱʲʷˠˤ˞↓↑→↗↘'̩'ᵻ"
)
SYMBOLS = [_PAD, *_PUNCTUATION, *_LETTERS, *_IPA]

# Kokoro 0.9.4 hard-wires hidden_dim 512, style_dim 128 and upsample_initial_channel 512; the
# rest is shrunk (BERT to one small layer, the vocoder to two 2x upsamplings with hop 75).
TINY_CONFIG: dict[str, Any] = {
    "dim_in": 64,
    "dropout": 0.2,
    "hidden_dim": 512,
    "max_conv_dim": 512,
    "max_dur": 8,
    "multispeaker": True,
    "n_layer": 1,
    "n_mels": 80,
    "n_token": 178,
    "style_dim": 128,
    "text_encoder_kernel_size": 5,
    "istftnet": {
        "upsample_kernel_sizes": [4, 4],
        "upsample_rates": [2, 2],
        "gen_istft_hop_size": 75,
        "gen_istft_n_fft": 300,
        "resblock_dilation_sizes": [[1, 3, 5]],
        "resblock_kernel_sizes": [3],
        "upsample_initial_channel": 512,
    },
    "plbert": {
        "hidden_size": 32,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 512,
        "num_hidden_layers": 1,
        "dropout": 0.1,
    },
}
TINY_VOICES = ("af_heart", "am_michael")


def write_tiny_model(target: Path, *, seed: int = 0) -> Path:
    """Create ``target`` with config.json, kokoro-v1_0.pth and voices/*.pt; return it."""
    torch.manual_seed(seed)
    config = dict(TINY_CONFIG, vocab={symbol: i for i, symbol in enumerate(SYMBOLS)})
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(config, ensure_ascii=False, indent=1), "utf-8")
    model = build_kmodel(config)
    torch.save({name: getattr(model, name).state_dict() for name in COMPONENTS}, target / "kokoro-v1_0.pth")
    voices = target / "voices"
    voices.mkdir(exist_ok=True)
    for name in TINY_VOICES:
        torch.save(torch.randn(510, 1, 256) * 0.1, voices / f"{name}.pt")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="directory to write (created if missing)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    path = write_tiny_model(args.dir, seed=args.seed)
    print(f"tiny Kokoro model written to {path}")


if __name__ == "__main__":
    main()
