"""The two plots of a ``make bench`` run: per mode, the text released against the audio received
(``timeline.png``), and the concurrency ladder (``concurrency.png``). Kept apart from ``report``,
which builds the numbers, because only these need matplotlib."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_timeline(raw: dict[str, Any], results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = tuple(results["ttfa_ms"])  # the modes the run measured, in its order
    fig, axes = plt.subplots(len(modes), 1, figsize=(10, 8), sharex=True)
    colors = {"batch": "tab:red", "stream": "tab:orange", "bidi": "tab:green"}
    answer_s = results["scenario"]["answer_ms"] / 1000
    for ax, mode in zip(axes, modes, strict=True):
        trace = next((t for t in raw["traces"][mode] if t.full), None)
        if trace is None:
            continue
        tl = trace.timeline()
        if tl["text"]:
            tx, ty = zip(*tl["text"], strict=True)
            ax.step(tx, ty, where="post", color="0.4", label="text released (chars)")
        for t, _ in tl["pieces"]:
            ax.axvline(t, color="0.8", lw=0.6, zorder=0)
        ax.set_ylabel("chars")
        ax2 = ax.twinx()
        if tl["audio"]:
            ax_, ay = zip(*tl["audio"], strict=True)
            ax2.step((0.0, *ax_), (0.0, *ay), where="post", color=colors[mode], lw=2, label="audio received (s)")
        ax2.set_ylabel("audio s")
        if trace.first_audio_s is not None:
            ax.axvline(trace.first_audio_s, color=colors[mode], ls="--", lw=1)
        ax.axvline(answer_s, color="0.3", ls=":", lw=1)
        ax.set_title(f"{mode}: first audio {trace.first_audio_s * 1000:.0f} ms, last audio "
                     f"{(trace.last_audio_s or 0):.1f} s, {trace.audio_s:.1f} s of audio", fontsize=10)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, loc="lower right", fontsize=8)
    axes[-1].set_xlabel("seconds since the start of the agent's answer (dotted: answer complete; "
                        "grey lines: pieces sent; dashed: first audio)")
    fig.suptitle(f"Text released vs audio received ({results['engine']} on {results['device']}, "
                 f"{results['model']['kind']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_concurrency(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rungs = results["concurrency"]
    xs = list(range(len(rungs)))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.38
    ax.bar([x - width / 2 for x in xs], [c["ttfa_p50_ms"] for c in rungs], width, label="TTFA p50", color="tab:blue")
    ax.bar([x + width / 2 for x in xs], [c["ttfa_p95_ms"] for c in rungs], width, label="TTFA p95", color="tab:cyan")
    ax.set_xticks(xs, [f"{c['sessions']}\nfair {c['fairness']}" for c in rungs])
    ax.set_xlabel("concurrent sessions (fairness = worst TTFA / median)")
    ax.set_ylabel("TTFA ms (from the start of the answer)")
    ax2 = ax.twinx()
    ax2.plot(xs, [c["rtf"] for c in rungs], "o-", color="tab:red", label="audio s / wall s")
    ax2.set_ylabel("aggregate audio seconds per wall second")
    ax2.set_ylim(bottom=0)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    ax.set_title(f"Concurrency ladder ({results['engine']} on {results['device']}, {results['model']['kind']})",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
