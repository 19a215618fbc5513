"""Voices by name, and blends of them: ``af_bella(2)+af_sky(1)`` wherever a voice is named.

A blend is a weighted mean of voice packs (Kokoro's style vectors live in one space, so a mean of
two packs is a voice between them). Weights are normalised to sum to 1; a part without a weight
counts 1. The blend's canonical name (``af_bella(0.6667)+af_sky(0.3333)``) is what the server
reports back, so a client can see what it got; the same blend always has the same name.

Every refusal is a :class:`ProtocolError` whose message starts with the field that named the
voice (``voice``, or whatever the route calls it), so a client knows what to fix.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from voicestream.protocol import ProtocolError

MAX_BLEND_PARTS = 8
BLEND_CACHE = 32  # blended packs kept (each 510 x 256 float32, ~0.5 MB)
BLEND_SYNTAX = "name or name(weight)+name(weight)..."  # VoiceBook.blend_syntax adds an example of its own voices
EXAMPLE_BLEND = ("af_bella", "af_sky")  # the docs' example, when the directory has both
_PART = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\s*(?:\(\s*([^()]*?)\s*\))?\s*$")


class VoiceBook:
    """The model directory's voice packs, and the blends of them asked for so far."""

    def __init__(self, *, packs: Mapping[str, np.ndarray]) -> None:
        self._packs = dict(packs)
        self._blends: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def names(self) -> list[str]:
        return sorted(self._packs)

    @property
    def blend_syntax(self) -> str:
        """BLEND_SYNTAX with an example blend of two voices this book has (none when it has one)."""
        pair = [n for n in EXAMPLE_BLEND if n in self._packs]
        pair = pair if len(pair) == 2 else self.names[:2]
        return f"{BLEND_SYNTAX}, e.g. {pair[0]}(2)+{pair[1]}(1)" if len(pair) == 2 else BLEND_SYNTAX

    def __contains__(self, name: object) -> bool:
        return name in self._packs or name in self._blends

    def resolve(self, spec: str, *, field: str = "voice") -> str:
        """The canonical name of ``spec`` (a voice or a blend); its pack is then ready in :meth:`pack`."""
        if spec in self._packs:
            return spec
        parts = parse_blend(spec, field=field)
        for name, _ in parts:
            if name not in self._packs:
                where = "" if len(parts) == 1 else f" in blend {spec!r}"
                raise ProtocolError(
                    "unknown_voice",
                    f"{field}: unknown voice {name!r}{where}; available: {', '.join(self.names)} "
                    f"(blends: {self.blend_syntax})",
                    field=field,
                )
        if len(parts) == 1:
            return parts[0][0]
        name = canonical_name(parts)
        if name not in self._blends:
            self._blends[name] = np.ascontiguousarray(
                sum(weight * self._packs[voice] for voice, weight in parts), dtype=np.float32
            )
            while len(self._blends) > BLEND_CACHE:
                self._blends.popitem(last=False)
        self._blends.move_to_end(name)
        return name

    def pack(self, name: str) -> np.ndarray:
        """The pack of a plain voice or of a blend :meth:`resolve` named (re-blended if evicted)."""
        found = self._packs.get(name)
        if found is None:
            found = self._blends.get(name)
        if found is None:
            return self._blends[self.resolve(name)]
        return found


def parse_blend(spec: str, *, field: str = "voice") -> list[tuple[str, float]]:
    """``"a(2)+b"`` -> ``[("a", 2/3), ("b", 1/3)]``: parts in order, repeats merged, weights summing to 1."""
    if not isinstance(spec, str) or not spec.strip():
        raise ProtocolError("invalid_field", f"{field}: must be a voice name or a blend ({BLEND_SYNTAX})", field=field)
    raw = spec.split("+")
    if len(raw) > MAX_BLEND_PARTS:
        raise ProtocolError(
            "invalid_field", f"{field}: a blend has at most {MAX_BLEND_PARTS} voices, got {len(raw)}", field=field
        )
    weights: dict[str, float] = {}
    for part in raw:
        match = _PART.match(part)
        if match is None:
            raise ProtocolError(
                "invalid_field", f"{field}: cannot read {part.strip()[:40]!r} as a voice ({BLEND_SYNTAX})", field=field
            )
        name, weight_text = match.groups()
        weight = 1.0 if weight_text is None else _weight(weight_text, name=name, field=field)
        weights[name] = weights.get(name, 0.0) + weight
    total = sum(weights.values())
    return [(name, weight / total) for name, weight in weights.items()]


def _weight(text: str, *, name: str, field: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ProtocolError(
            "invalid_field", f"{field}: weight of {name!r} must be a positive number, got {text[:20]!r}", field=field
        )
    return value


def canonical_name(parts: list[tuple[str, float]]) -> str:
    return "+".join(f"{name}({weight:.4g})" for name, weight in parts)
