"""The torch engine: kokoro's own ``KModel``, loaded strictly from the model directory.

kokoro 0.9.4 retries a failed ``load_state_dict`` with ``strict=False`` and only logs at debug
level, so a wrong or truncated checkpoint would load partly and speak noise. We build the
architecture from config.json with an empty checkpoint, then load every component ourselves with
``strict=True`` and report missing, unexpected or mis-shaped keys by name.

Every torch call of an engine runs on the engine's own thread, whichever thread asks. On a CPU,
torch runs an op on an OpenMP team of the calling thread, and each thread that calls keeps a team
of its own; once the teams' threads outnumber the cores, libgomp spins 100 times instead of 300,000
before it sleeps at a barrier (its manual, GOMP_SPINCOUNT), and a model of many small ops waits at
each. Loaded on one thread and run on another, kokoro's model spoke a 6-word sentence 1.32x slower
on 2 cores (bench/results/torch_threads.json).
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from kokoro import KModel

from ..config import ConfigError
from ..model_dir import ModelDir, ModelDirError
from .base import MAX_PHONEMES, EngineError, Synthesis
from .halt import Halt, Halted
from .time_major import to_time_major
from .torch_inference import decoder_body, for_inference
from .windows import FEATURE_CONTEXT, Decoding, feature_span

R = TypeVar("R")
COMPONENTS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
REPO_ID = "hexgrad/Kokoro-82M"  # only names the architecture; nothing is downloaded


def pick_device(requested: str | None) -> str:
    """The device to load on. An explicit ``cuda`` without a usable GPU is a start-up error.

    On a GPU instance the stack sets KOKORO_DEVICE=cuda: a driver/CUDA mismatch must stop the
    container (exit 2, /ping never answers) rather than serve 10x slower on the CPU unnoticed.
    """
    if requested and requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(
                f"KOKORO_DEVICE={requested}: torch {torch.__version__} sees no usable CUDA device "
                f"(built for CUDA {torch.version.cuda or 'none: a CPU-only build'}); refusing to fall "
                "back to the CPU. Check the instance's GPU driver (InferenceAmiVersion) or set "
                "KOKORO_DEVICE=cpu on purpose"
            )
        return requested
    if requested:
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


def build_kmodel(config: dict[str, Any], *, disable_complex: bool = False) -> KModel:
    """KModel with the architecture of ``config`` and untrained weights, never touching the hub."""
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.pth"
        torch.save({}, empty)
        return KModel(repo_id=REPO_ID, config=config, model=str(empty), disable_complex=disable_complex)


def load_checkpoint_strictly(kmodel: KModel, path: Path) -> None:
    """Load all five components from ``path`` or raise ModelDirError naming what does not fit."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ModelDirError(f"{path}: cannot read checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(checkpoint, dict):
        raise ModelDirError(f"{path}: expected a dict of state dicts, got {type(checkpoint).__name__}")
    missing = [c for c in COMPONENTS if c not in checkpoint]
    unexpected = [c for c in checkpoint if c not in COMPONENTS]
    if missing or unexpected:
        raise ModelDirError(f"{path}: components missing {missing}, unexpected {unexpected}")
    for name in COMPONENTS:
        state = checkpoint[name]
        if state and all(key.startswith("module.") for key in state):
            state = {key[len("module."):]: value for key, value in state.items()}  # DataParallel
        module: torch.nn.Module = getattr(kmodel, name)
        expected = module.state_dict()
        lacking = sorted(set(expected) - set(state))
        extra = sorted(set(state) - set(expected))
        if lacking or extra:
            raise ModelDirError(
                f"{path}: component {name!r} does not match config.json: "
                f"{len(lacking)} missing keys {lacking[:3]}, {len(extra)} unexpected keys {extra[:3]}"
            )
        for key, tensor in state.items():
            if tuple(tensor.shape) != tuple(expected[key].shape):
                raise ModelDirError(
                    f"{path}: {name}.{key} has shape {tuple(tensor.shape)}, config.json implies "
                    f"{tuple(expected[key].shape)}"
                )
        module.load_state_dict(state, strict=True)


def for_device(kmodel: KModel, device: str) -> None:
    """kokoro's layers rewritten, in place, as the engine runs them on ``device``: the same function
    with less work per call (torch_inference.py, bit for bit), and on a CPU the decoder in oneDNN's
    layout for its convolutions (time_major.py, to float rounding)."""
    for_inference(kmodel)
    if torch.device(device).type == "cpu":
        to_time_major(kmodel.decoder)


class SharedSource(torch.nn.Module):  # type: ignore[misc]  # torch has no stubs where mypy runs (.venv)
    """Stands in for the vocoder's harmonic source module (``Generator.m_source``): made once per
    chunk over all its frames (``make``), each window's decoder call is handed its slice
    (``using``). Outside ``using`` it runs the original module, so the decoder still works alone.

    ``make`` draws the excitation noise after the harmonics are merged, not before. kokoro's
    ``SourceModuleHnNSF`` adds ``amp * N(0, 1)`` to each of its 9 harmonics and merges them with a
    linear layer ``w``; all 9 share ``amp`` (it follows voicing), so the merged noise is
    ``amp * N(0, |w|^2)``, one draw per sample instead of 9: the same distribution
    (tests/kokoro/test_torch_engine.py). It also skips the noise branch the generator never
    reads. On the CPU those draws are single-threaded and were 72 % of the source's time
    (bench/results/profile-torch.json, ``source_once_s``).
    """

    def __init__(self, original: torch.nn.Module, upsample: torch.nn.Module) -> None:
        super().__init__()
        self.original = original
        self.upsample = upsample
        self._window: torch.Tensor | None = None

    @classmethod
    def install(cls, generator: torch.nn.Module) -> "SharedSource":
        shared = cls(generator.m_source, generator.f0_upsamp)
        generator.m_source = shared
        return shared

    def make(self, f0: torch.Tensor) -> torch.Tensor:
        """The harmonic source of a whole chunk: [1, samples, 1], from its F0 curve [1, 2 * frames]."""
        sine_gen, merge = self.original.l_sin_gen, self.original.l_linear
        f0 = self.upsample(f0[:, None]).transpose(1, 2)  # [1, samples, 1]
        overtones = torch.arange(1, sine_gen.dim + 1, dtype=f0.dtype, device=f0.device)
        sines = sine_gen._f02sine(f0 * overtones) * sine_gen.sine_amp
        voiced = sine_gen._f02uv(f0)
        amp = voiced * sine_gen.noise_std + (1 - voiced) * sine_gen.sine_amp / 3
        noise = amp * torch.randn_like(voiced) * torch.linalg.vector_norm(merge.weight)
        return self.original.l_tanh(merge(sines * voiced) + noise)

    @contextlib.contextmanager
    def using(self, window: torch.Tensor) -> Iterator[None]:
        self._window = window
        try:
            yield
        finally:
            self._window = None

    def forward(self, f0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        window = self._window
        if window is None:
            return self.original(f0)  # type: ignore[no-any-return]
        if window.shape[1] != f0.shape[1]:
            raise EngineError(f"harmonic source: {window.shape[1]} samples for an F0 of {f0.shape[1]}")
        unused = torch.zeros_like(window)
        return window, unused, unused


def halt_points(model: KModel) -> list[torch.nn.Module]:
    """The blocks a halted job stops before: the front's four parts, then the decoder's blocks and
    the vocoder's upsampling and residual blocks (each a small part of a window's time). Not every
    module: a pre-hook costs ~3 us a call and the model makes hundreds of calls a chunk, which a
    GPU would feel; these are about 25."""
    generator = model.decoder.generator
    blocks = [model.bert, model.bert_encoder, model.predictor, model.text_encoder, model.decoder.encode,
              *model.decoder.decode, generator.conv_post]
    for name in ("ups", "resblocks", "noise_convs", "noise_res"):
        blocks.extend(getattr(generator, name))
    return blocks


def _seed(phonemes: str, speed: float) -> int:
    """Kokoro's vocoder draws noise; seeding by input makes the same request give the same samples."""
    return zlib.crc32(f"{speed:.4f}|{phonemes}".encode())


class TorchEngine:
    """Kokoro on torch: CUDA on ml.g5 (A10G), CPU elsewhere.

    ``begin`` runs KModel's front (BERT, durations, alignment, F0 and energy, the text encoder)
    and the vocoder's harmonic source once per chunk, as the onnx engine does; each
    ``Decoding.step`` runs ``KModel.decoder``'s body over one window's features and their context
    (torch_inference.decoder_body), then its vocoder over the window with its slice of that source
    (:class:`SharedSource`). The windows' sines are then the one-shot render's (no new random phase
    per window), and no window pays for a source of its own. On the CPU its decoder is laid out
    time-major (time_major.py: oneDNN's layout, kokoro's function to float rounding).
    """

    name = "torch"

    def __init__(self, *, model: ModelDir, device: str | None = None) -> None:
        self.device = pick_device(device)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="kokoro-torch")  # the one that runs torch
        self._thread_id: int | None = None  # its ident, once it has run
        self._model, self._source = self._on_thread(self._load, model)
        self._lock = threading.Lock()  # one forward at a time, whatever thread calls
        self._halt: Halt | None = None  # the running job's, while it holds the lock
        for module in halt_points(self._model):
            module.register_forward_pre_hook(self._check_halt)

    def _load(self, model: ModelDir) -> tuple[KModel, SharedSource]:
        self._thread_id = threading.get_ident()
        if self.device == "cpu":
            torch.set_flush_denormal(True)  # denormals in the vocoder cost 30-50% on CPU (a thread's own setting)
        kmodel = build_kmodel(model.config)
        load_checkpoint_strictly(kmodel, model.weights)
        for_device(kmodel, self.device)
        kmodel = kmodel.to(self.device).eval()
        return kmodel, SharedSource.install(kmodel.decoder.generator)

    def _on_thread(self, fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)`` on the engine's thread (the module's docstring says why), its error raised
        here; called on that thread, it runs at once (waiting for itself would never end)."""
        if threading.get_ident() == self._thread_id:
            return fn(*args)
        return self._thread.submit(fn, *args).result()

    def _check_halt(self, module: torch.nn.Module, args: Any) -> None:
        halt = self._halt
        if halt is not None:
            halt.check()

    @contextlib.contextmanager
    def _running(self, halt: Halt | None) -> Iterator[None]:
        """One forward at a time; ``halt`` stops it at the next module."""
        with self._lock:
            if halt is not None:
                halt.check()
            self._halt = halt
            try:
                yield
            finally:
                self._halt = None

    def begin(self, phonemes: str, style: np.ndarray, speed: float, *, halt: Halt | None = None) -> Decoding:
        if not phonemes or len(phonemes) > MAX_PHONEMES:
            raise EngineError(f"phonemes: length {len(phonemes)} is outside 1..{MAX_PHONEMES}")
        if not np.isfinite(speed) or speed <= 0:
            raise EngineError(f"speed: must be a positive number, got {speed!r}")
        return self._on_thread(self._begin, phonemes, style, speed, halt)

    def _begin(self, phonemes: str, style: np.ndarray, speed: float, halt: Halt | None) -> Decoding:
        ref_s = torch.from_numpy(np.ascontiguousarray(style, dtype=np.float32)).reshape(1, -1).to(self.device)
        seed = _seed(phonemes, speed)
        try:
            with self._running(halt), torch.inference_mode():
                torch.manual_seed(seed)
                asr, f0, energy, durations = self._front(phonemes, ref_s, speed)
                torch.manual_seed(seed)  # the source draws the vocoder's noise, as a one-shot decoder would
                source = self._source.make(f0)
        except EngineError:  # Halted among them
            raise
        except Exception as exc:
            raise EngineError(f"synthesis failed: {type(exc).__name__}: {exc}") from exc
        decoder_style = ref_s[:, :128]
        frames = int(asr.shape[2])
        per_frame = source.shape[1] // frames

        def decode(lo: int, hi: int, halt: Halt | None = None, *, reach: int = FEATURE_CONTEXT) -> np.ndarray:
            return self._on_thread(decode_here, lo, hi, halt, reach)

        def decode_here(lo: int, hi: int, halt: Halt | None, reach: int) -> np.ndarray:
            flo, fhi = feature_span(lo, hi, frames, reach)
            decoder = self._model.decoder
            try:
                with self._running(halt), torch.inference_mode(), \
                        self._source.using(source[:, lo * per_frame:hi * per_frame]):
                    torch.manual_seed(seed + lo)  # any other draw: same input, same samples
                    body = decoder_body(decoder, asr[:, :, flo:fhi], f0[:, 2 * flo:2 * fhi],
                                        energy[:, 2 * flo:2 * fhi], decoder_style)
                    steps = body.shape[2] // (fhi - flo)
                    body = body[:, :, (lo - flo) * steps:(hi - flo) * steps]
                    audio = decoder.generator(body, decoder_style, f0[:, 2 * lo:2 * hi])
            except Halted:
                raise
            except Exception as exc:
                raise EngineError(f"synthesis failed: {type(exc).__name__}: {exc}") from exc
            samples: np.ndarray = audio.detach().to(torch.float32).cpu().numpy().reshape(-1)
            return samples

        return Decoding(frames=frames, decode=decode, durations=durations)

    def _front(
        self, phonemes: str, ref_s: torch.Tensor, speed: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, np.ndarray]:
        """KModel.forward_with_tokens up to the decoder: features, F0, energy, frames per token."""
        m = self._model
        ids = [i for i in map(m.vocab.get, phonemes) if i is not None]
        if not ids:
            raise EngineError(f"phonemes: none of {phonemes[:40]!r} is in the model's vocab")
        input_ids = torch.LongTensor([[0, *ids, 0]]).to(self.device)
        lengths = torch.full((1,), input_ids.shape[-1], device=self.device, dtype=torch.long)
        text_mask = torch.zeros((1, input_ids.shape[-1]), dtype=torch.bool, device=self.device)
        d_en = m.bert_encoder(m.bert(input_ids, attention_mask=(~text_mask).int())).transpose(-1, -2)
        s = ref_s[:, 128:]
        d = m.predictor.text_encoder(d_en, s, lengths, text_mask)
        x, _ = m.predictor.lstm(d)
        duration = torch.sigmoid(m.predictor.duration_proj(x)).sum(axis=-1) / speed
        pred_dur = torch.round(duration).clamp(min=1).long().reshape(-1)
        indices = torch.repeat_interleave(torch.arange(input_ids.shape[1], device=self.device), pred_dur)
        alignment = torch.zeros((input_ids.shape[1], indices.shape[0]), device=self.device)
        alignment[indices, torch.arange(indices.shape[0])] = 1
        alignment = alignment.unsqueeze(0)
        f0, energy = m.predictor.F0Ntrain(d.transpose(-1, -2) @ alignment, s)
        asr = m.text_encoder(input_ids, lengths, text_mask) @ alignment
        return asr, f0, energy, pred_dur.cpu().numpy()

    def synthesize(self, phonemes: str, style: np.ndarray, speed: float) -> Synthesis:
        decoding = self.begin(phonemes, style, speed)
        return Synthesis(audio=np.ascontiguousarray(decoding.rest()), durations=decoding.durations)
