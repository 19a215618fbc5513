"""What each generated doc table says: one function per table, parsed results in, markdown lines out.

Pure and deterministic (no clock, no machine): ``bench.tables`` calls them and a test compares the
committed docs with what they return. A caption names the file and the run each figure comes from.
"""

from __future__ import annotations

from typing import Any

Results = dict[str, Any]


def num(value: float | int | None, unit: str = "") -> str:
    """A figure as recorded (no rounding beyond the record's own), or n/a."""
    if value is None:
        return "n/a"
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{text} {unit}".rstrip()


def when(timestamp: str) -> str:
    """An ISO timestamp to the minute, as captions print it."""
    return timestamp[:16].replace("T", " ")


def run_caption(latest: Results) -> str:
    """Which run of ``make bench`` a figure comes from, and what it spoke with."""
    m, model = latest["machine"], latest["model"]
    voice = (f"voice `{latest['voice']}`" if "voice" in latest else
             "this record predates the English voices and names no voice: it spoke `jf_alpha` (Japanese)")
    weights = "" if model["real_weights"] else " (NOT the real weights: plumbing figures only)"
    return (f"`bench/results/latest.json`: `make bench` of {when(latest['timestamp'])} UTC, "
            f"{latest['engine']} engine on {m['cpu_count']} CPUs ({m['cpu_model']}, "
            f"load {m['loadavg_1m_start']} to {m['loadavg_1m_end']}), "
            f"{model['kind']}{weights}, {num(latest['wall_s'], 's')} without the capacity step; {voice}.")


def _target(latest: Results, name: str) -> Results:
    found: list[Results] = [t for t in latest["targets"] if t["name"] == name]
    if not found:
        raise KeyError(f"latest.json has no target named {name!r}")
    return found[0]


def _verdict(target: Results) -> str:
    return "n/a" if target["met"] is None else ("met" if target["met"] else "**not met**")


def headline(latest: Results, capacity: Results, codecs: Results) -> list[str]:
    ttfa, aws = latest["ttfa_ms"], latest["aws_reference"]
    speedup = _target(latest, "bidi speedup vs batch (TTFA)")
    stream = _target(latest, "stream TTFA / batch TTFA")
    overhead = _target(latest, "server overhead p50 (ms)")
    words = _target(latest, "word timestamps' cost to TTFA, p50 (ms)")
    cap = capacity["capacity"]
    by_rate = {(r["format"], r["sample_rate"]): r for r in codecs["rows"]}
    quality = ", ".join(f"{f} {num(by_rate[(f, 24000)]['pesq_wb'])} ({num(by_rate[(f, 24000)]['kbps'])} kbps)"
                        for f in ("opus", "mp3", "aac") if (f, 24000) in by_rate)
    return [
        "| | measured | target | AWS sample (GPU) |",
        "|---|---|---|---|",
        f"| first audio of an agent's answer: one pipelined WebSocket / whole answer in one POST | "
        f"{num(ttfa['bidi'], 'ms')} / {num(ttfa['batch'], 'ms')} ({num(latest['speedup_bidi_vs_batch'])}x sooner) | "
        f"{speedup['target']} ({_verdict(speedup)}) | {aws['bidi_speedup_local']}-{aws['bidi_speedup_deployed']}x |",
        f"| first audio, a POST per sentence / whole answer | {num(stream['value'])} | "
        f"{stream['target']} ({_verdict(stream)}) | {aws['stream_vs_batch']} |",
        f"| server overhead (first audio minus model time), p50 | {num(overhead['value'], 'ms')} | "
        f"{overhead['target']} ({_verdict(overhead)}) | |",
        f"| word timestamps' cost to first audio, p50 | {num(words['value'], 'ms')} | "
        f"{words['target']} ({_verdict(words)}) | |",
        f"| sessions one engine serves, first audio p95 within {num(cap['budget_ms'], 'ms')}, no stall | "
        f"{cap['sessions']} | | |",
        f"| speech quality against pcm at 24 kHz (PESQ wideband, 1-4.64) | {quality} | | |",
        "",
        f"Rows 1-4: {run_caption(latest)} Row 5: `bench/results/capacity.json` ({when(capacity['timestamp'])} UTC, "
        f"instance type `{cap['instance_type']}`). Row 6: `bench/results/codec_quality.json` (voice "
        f"`{codecs['voice']}`). AWS sample: {aws['instance']}.",
    ]


def targets(latest: Results) -> list[str]:
    aws = latest["aws_reference"]
    lines = ["| goal | target | measured | verdict |", "|---|---|---|---|"]
    lines += [f"| {t['name']} | {t['target']} | {num(t['value'])} | {_verdict(t)} |" for t in latest["targets"]]
    return lines + [
        "",
        f"{run_caption(latest)} Decoder pace {num(latest['decoder_pace'])} (measured at warm-up), engine "
        f"{num(latest['engine_rtf'])} model seconds per audio second on the first fragment. AWS's sample on "
        f"{aws['instance']}: stream/batch {aws['stream_vs_batch']} ({aws['ttfa_batch_ms']} to "
        f"{aws['ttfa_stream_ms']} ms), bidi {aws['bidi_speedup_local']}x (local) to {aws['bidi_speedup_deployed']}x "
        "(deployed) sooner than batch.",
    ]


def ttfa(latest: Results) -> list[str]:
    lines = ["| mode | first audio p50 ms | p95 | min | max | n | last audio p50 ms |", "|---|---|---|---|---|---|---|"]
    for mode, s in latest["ttfa_spread_ms"].items():
        lines.append(f"| {mode} | {num(s['p50'])} | {num(s['p95'])} | {num(s['min'])} | {num(s['max'])} | "
                     f"{s['n']} | {num(latest['last_audio_ms'][mode])} |")
    o = latest["server_overhead_ms"]
    lines += ["", f"Server overhead p50 {num(o['p50'], 'ms')} (p95 {num(o['p95'])}, n {o['n']}); "
              f"8-session ladder p95 {num(latest['concurrency'][-1]['ttfa_p95_ms'], 'ms')}. {run_caption(latest)}"]
    return lines


def arrivals(latest: Results) -> list[str]:
    design = latest["design"]
    load = design["arrival_load"]
    lines = ["| sessions | deadline: p95 first audio ms | stall ms per audio min | round-robin: p95 ms | stall |",
             "|---|---|---|---|---|"]
    for deadline, rr in zip(load["deadline"], load["round_robin"], strict=True):
        lines.append(f"| {deadline['sessions']} | {num(deadline['ttfa_p95_ms'])} | "
                     f"{num(deadline['stall_ms_per_audio_min'])} | {num(rr['ttfa_p95_ms'])} | "
                     f"{num(rr['stall_ms_per_audio_min'])} |")
    lines += ["", "| first audio, median ms | " + " | ".join(design["factorial_ttfa_ms"]["windowed"]) + " |",
              "|---|" + "---|" * len(design["factorial_ttfa_ms"]["windowed"])]
    for decoding, row in design["factorial_ttfa_ms"].items():
        lines.append(f"| {decoding} | " + " | ".join(num(v) for v in row.values()) + " |")
    lines += ["", f"Arrivals spread over {num(design['arrival_spread_s'], 's')}, {design['arrival_patterns']} start "
              f"patterns pooled per rung. {run_caption(latest)}"]
    return lines


def paired_variants(record: Results) -> str:
    """A bench.paired file's variants and the settings each ran with, for a caption."""
    return "; ".join(f"`{name}`: " + (", ".join(f"{k}={v}" for k, v in env.items()) or "this tree")
                     for name, env in record["variants"].items())


def paired_arrivals(record: Results, *, source: str) -> list[str]:
    """bench.paired's arrival runs (``source``: the file, under bench/results): stall and p95 first
    audio per variant and rung, patterns pooled."""
    by_cell = {(row["variant"], row["sessions"]): row for row in record["summary"]}
    lines = ["| ms of stall per audio minute (p95 first audio ms, by pattern) | "
             + " | ".join(f"{n} sessions" for n in record["sessions"]) + " |",
             "|---|" + "---|" * len(record["sessions"])]
    for variant in record["variants"]:
        cells = [by_cell[variant, n] for n in record["sessions"]]
        lines.append(f"| {variant} | " + " | ".join(
            f"{num(c['stall_ms_per_audio_min'])} ({', '.join(num(t) for t in c['ttfa_p95_ms_by_pattern'])})"
            for c in cells) + " |")
    return lines + ["", f"`bench/results/{source}` (`python -m bench.paired ...`): "
                    f"{paired_variants(record)}; decoder "
                    f"pace {num(record['decoder_pace'])} for all, start patterns {record['patterns']}, arrivals "
                    f"spread over {num(record['arrival_spread_s'], 's')}."]


def capacity(record: Results) -> list[str]:
    cap = record["capacity"]
    lines = ["| sessions | utterances | first audio p95 ms | stall ms | within budget |", "|---|---|---|---|---|"]
    lines += [f"| {r['sessions']} | {r['utterances']} | {num(r['first_audio_p95_ms'])} | {num(r['stall_ms_total'])} | "
              f"{'yes' if r['ok'] else 'no'} |" for r in record["ladder"]]
    return lines + ["", f"`bench/results/capacity.json` ({when(record['timestamp'])} UTC, `{record['model']}`, "
                    f"instance type `{cap['instance_type']}`): **{cap['sessions']}** session(s) within "
                    f"{num(cap['budget_ms'], 'ms')} and no stall."]


def codec_quality(record: Results) -> list[str]:
    lines = ["| format | sample rate Hz | kbps | PESQ wideband |", "|---|---|---|---|"]
    lines += [f"| {r['format']} | {r['sample_rate']} | {num(r['kbps'])} | {num(r['pesq_wb'])} |"
              for r in record["rows"]]
    return lines + ["", f"`bench/results/codec_quality.json`: {record['model']}, voice `{record['voice']}`, "
                    f"\"{record['text']}\" ({num(record['audio_s'], 's')})."]


def _plan(plan: Results, default: Results) -> str:
    label = (f"first {plan['first']}, x{plan['growth']:g}, vocoder context {plan['context']}, "
             f"crossfade {plan['crossfade']}")
    same = all(plan.get(k) == v for k, v in default.items())
    return label + (" (default)" if same else "")


def _parts(sentence: Results) -> str:
    parts = sentence.get("decoder_parts")
    if not parts:
        return ""
    return (f" One shot, the decoder's body took {num(parts['body_s'])} s and the vocoder {num(parts['vocoder_s'])} s "
            f"({num(parts['vocoder_share'])} of the decoder).")


def windowing(record: Results) -> list[str]:
    lines = []
    for name, s in record["sentences"].items():
        lines += [
            f"**{name}** ({s['frames']} frames): one shot WER {num(s['one_shot_wer'])}, largest sample jump "
            f"{num(s['one_shot_jump_max'])}; the model's own variation {num(s['variation_one_frame_less_db'])} dB "
            f"(one frame less) and {num(s['variation_style_row_db'])} dB (neighbouring style row).{_parts(s)}",
            "",
            "| plan | windows (frames) | log-mel dB from one shot | PESQ wb | seam jump | WER | stall ms |",
            "|---|---|---|---|---|---|---|",
        ]
        rows = [(_plan(p, record["default"]), p) for p in s["plans"]]
        rows.append((f"paced at {num(s['paced']['pace'])}", s["paced"]))
        lines += [f"| {label} | {', '.join(map(str, p['windows']))} | {num(p['log_mel_db'])} | {num(p['pesq'])} | "
                  f"{num(p['seam_max_jump'])} | {num(p['wer'])} | {num(p['stall_ms'])} |" for label, p in rows]
        lines.append("")
    return lines + [f"`bench/results/windowing.json`: {record['engine']} engine, voice `{record['voice']}`, "
                    f"{record['cpus']} CPUs, load average {record['load_average_before'][0]} before (stall times "
                    f"depend on the load; the quality columns do not), pace pinned at {num(record['pace'])}."]


def soak(record: Results) -> list[str]:
    rss, vanish = record["rss_mib"], record["vanish"]
    rows = [
        ("sessions x turns (random cancels)",
         f"{record['sessions']} x {record['turns']} ({record['cancel_rate']:.0%})"),
        ("utterances whose audio matched their text's reference render",
         f"{record['audio_verified']} of {record['utterances']}"
         + (f" ({record['carried']} carried on earlier audio: a record from before the job sizer)"
            if "carried" in record else "")),
        ("resident memory peak, first half / second half after warm-up",
         f"{num(rss['first_half_peak'])} / {num(rss['second_half_peak'])} MiB "
         f"(tolerance {num(record['rss_tolerance_mib'])})"),
        ("file descriptors, asyncio tasks before / after",
         f"{record['fds']['before']} / {record['fds']['after']}, "
         f"{record['tasks']['before']} / {record['tasks']['after']}"),
        ("clients vanishing mid-encode: sessions, crashes", f"{vanish['vanished']}, {vanish['crashes']}"),
        ("problems found", str(len(record["problems"]))),
    ]
    return (["| soak | result |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
            + ["", f"`bench/results/soak.json` (`make soak`; tiny model, loopback, {num(record['elapsed_s'], 's')})."])


def speeds(record: Results) -> list[str]:
    lines = ["| speed | audio s | length vs 1.0 | word error rate |", "|---|---|---|---|"]
    lines += [f"| {num(float(r['speed']))} | {num(r['audio_s'])} | {num(r['duration_vs_speed_1'])} | {num(r['wer'])} |"
              for r in record["speeds"]]
    return lines + ["", f"`bench/results/speeds.json` (`python -m bench.speeds`): {record['engine']} engine, voice "
                    f"`{record['voice']}`, {len(record['sentences'])} plain sentences, pocketsphinx."]


def speech_content(record: Results) -> list[str]:
    lines = ["| route, format or voice | word error rate | against another sentence |", "|---|---|---|"]
    lines += [f"| {route} | {num(r['wer'])} | {num(r['wer_other_sentence'])} |"
              for route, r in record["routes"].items()]
    words = sum(len(s.split()) for s in record["sentences"])
    return lines + ["", f"`bench/results/speech_content.json` (`tests/kokoro/speech_content.py`): voice "
                    f"`{record['voice']}` unless named, {len(record['sentences'])} plain sentences ({words} words), "
                    "pocketsphinx's US English model."]


#: bench/frameworks.py's variants, as a reader knows them
FRAMEWORK_VARIANTS = {
    "livekit_kokoro": "LiveKit: voicestream `KokoroTTS` (bidi stream)",
    "livekit_openai_adapter": "LiveKit: `openai.TTS` + `StreamAdapter`",
    "pipecat_kokoro": "pipecat: voicestream `KokoroTTSService` (bidi stream)",
    "pipecat_openai": "pipecat: `OpenAITTSService`",
}


def frameworks(record: Results) -> list[str]:
    lines = ["| variant | first audio p50 ms | range | last audio p50 ms | range |", "|---|---|---|---|---|"]
    for key, label in FRAMEWORK_VARIANTS.items():
        v = record["variants"][key]
        first = [r["ttfa_ms"] for r in v["runs"]]
        last = [r["total_ms"] for r in v["runs"]]
        lines.append(f"| {label} | {v['ttfa_p50_ms']:.0f} | {min(first):.0f}-{max(first):.0f} | "
                     f"{v['total_p50_ms']:.0f} | {min(last):.0f}-{max(last):.0f} |")
    for framework, ours, theirs in (("LiveKit", "livekit_kokoro", "livekit_openai_adapter"),
                                    ("pipecat", "pipecat_kokoro", "pipecat_openai")):
        pairs = list(zip(record["variants"][ours]["runs"], record["variants"][theirs]["runs"], strict=True))
        sooner = sum(a["ttfa_ms"] < b["ttfa_ms"] for a, b in pairs)
        lines.append(f"| {framework}: rounds where the plugin's first audio came sooner | {sooner} of {len(pairs)} "
                     "| | | |")
    return lines + ["", f"`bench/results/frameworks.json` (`make bench-frameworks`): {record['server']['model']} "
                    f"on the {record['server']['device']}; one answer of {record['answer_words']} words, a token every "
                    f"{num(record['token_ms'], 'ms')}; {record['rounds']} interleaved rounds; load average "
                    f"{record['loadavg_before'][0]} before."]


def scenario(latest: Results) -> list[str]:
    sc = latest["scenario"]
    return [
        f"The answer: {sc['paragraphs']} paragraphs, {sc['chars']} characters, cut into {sc['tokens']} tokens "
        f"({num(sc['mean_token_chars'])} characters on average, like LLM tokens) released every "
        f"{num(sc['token_interval_ms'], 'ms')} after a {num(sc['first_token_ms'], 'ms')} first-token delay:",
        "",
        "| event | time after the answer starts |",
        "|---|---|",
        f"| first token | {num(sc['first_token_ms'], 'ms')} |",
        f"| first fragment (the agent's early clause, `early_first_fragment=True`): \"{sc['first_fragment_text']}\" "
        f"| {num(sc['first_fragment_ms'], 'ms')} |",
        f"| first sentence (the plain chunker): \"{sc['first_sentence_text']}\" "
        f"| {num(sc['first_sentence_ms'], 'ms')} |",
        f"| last token (the answer is complete) | {num(sc['answer_ms'], 'ms')} |",
        "",
        f"`bench/results/latest.json`, `scenario` (`{sc['name']}`).",
    ]
