"""Renderers for the tables of the speech-cost results: normalization by ear and the engine
against a plain Kokoro loop (``bench.tables`` registers them; ``bench.doc_tables`` holds the rest)."""

from __future__ import annotations

from .doc_tables import Results, num, paired_variants

#: The engine-vs-loop ratios in the order docs/throughput.md explains them.
RATIOS = {
    "total_over_loop_sentence": "paragraph total time, ours / `loop_sentence`",
    "total_over_loop_chunk": "paragraph total time, ours / `loop_chunk`",
    "total_over_sentence_jobs": "paragraph total time, ours / ours with one job per sentence",
    "total_over_linear_pace": "paragraph total time, ours / ours with windows cut by the warm-up pace alone",
    "total_over_wide_seams": "paragraph total time, ours / ours with the wide seams",
    "cpu_per_audio_over_loop_sentence": "CPU s per audio s, ours / `loop_sentence`",
    "cpu_per_audio_over_loop_chunk": "CPU s per audio s, ours / `loop_chunk`",
    "concurrent_wall_over_loop_sentence_x4": "4 paragraphs at once, wall / `loop_sentence` x 4",
    "concurrent_wall_over_sentence_jobs": "4 paragraphs at once, wall / ours with one job per sentence",
    "concurrent_wall_over_linear_pace": "4 paragraphs at once, wall / ours with the warm-up pace alone",
    "concurrent_wall_over_wide_seams": "4 paragraphs at once, wall / ours with the wide seams",
    "first_over_loop_sentence": "paragraph first byte, ours / `loop_sentence`",
    "first_over_loop_chunk": "paragraph first byte, ours / `loop_chunk`",
    "second_caller_first_over_loop": "a second caller's first byte, ours / `loop_chunk`",
    "short_first_over_one_shot": "a short sentence alone, first byte: windowed / one-shot",
    "short_total_over_loop": "6 words alone, total time, ours / `loop_sentence`",
    "short_cpu_over_loop": "6 words alone, CPU s, ours / `loop_sentence`",
    "short_first_over_loop": "6 words alone, first byte, ours / `loop_sentence`",
    "long_total_over_loop": "35 words alone, total time, ours / `loop_sentence`",
    "long_cpu_over_loop": "35 words alone, CPU s, ours / `loop_sentence`",
    "long_first_over_loop": "35 words alone, first byte, ours / `loop_sentence`",
    **{f"{size}_{kind}_over_wide_seams": f"{words} words alone, {what}, ours / ours with the wide seams"
       for size, words in (("short", 6), ("long", 35))
       for kind, what in (("total", "total time"), ("cpu", "CPU s"), ("first", "first byte"))},
}


def normalization(record: Results) -> list[str]:
    """Mean word error rate per kind of text, normalization on and off, and overall."""
    lines = ["| kind | sentences | WER with normalization | WER without |", "|---|---|---|---|"]
    for kind, row in record["by_kind"].items():
        lines.append(f"| {kind} | {row['sentences']} | {row['wer_on']:.3f} | {row['wer_off']:.3f} |")
    lines.append(f"| **all** | **{record['sentences']}** | **{record['mean_wer_on']:.3f}** "
                 f"| **{record['mean_wer_off']:.3f}** |")
    lines += ["", f"`bench/results/normalization.json`: voice `{record['voice']}`, {record['engine']}, "
              f"{record['route']}, {record['transcriber']}, one run of {num(record['elapsed_s'], 's')}."]
    return lines


def _met(target: Results) -> str:
    if target["met"] is None:
        return "(no target)"
    return "met" if target["met"] else "**not met**"


def _fitted(record: Results) -> str:
    cost = record.get("decoder_cost")
    if not cost:
        return ""
    return f" (fitted: {num(1000 * cost['overhead_s'])} ms a call and {num(cost['pace'])} per audio second)"


def _answer(side: Results) -> str:
    return f"{num(side['first_s'])} / {num(side['total_s'])} / {num(side['cpu_s'])}"


def engine_vs_loop(record: Results) -> list[str]:
    """Medians of our engine path and the two loops, then each ratio against its bound."""
    rows, para = record["rows"], record["rows"]["paragraph"]
    sides = ("ours", "ours_sentence_jobs", "ours_linear_pace", "ours_wide_seams", "loop_sentence", "loop_chunk")
    lines = ["| median | ours | ours, one job per sentence | ours, warm-up pace alone | ours, wide seams "
             "| `loop_sentence` | `loop_chunk` |", "|---|---|---|---|---|---|---|"]
    for key, label in (("first_s", "paragraph first byte s"), ("total_s", "paragraph total s"),
                       ("cpu_per_audio_s", "CPU s per audio s"), ("audio_s", "audio s")):
        lines.append(f"| {label} | " + " | ".join(num(para.get(side, {}).get(key)) for side in sides) + " |")
    if any("decoded_per_heard" in para.get(side, {}) for side in sides):
        lines.append("| frames decoded per frame heard | " + " | ".join(
            num(para.get(side, {}).get("decoded_per_heard", 1.0 if side.startswith("loop") else None))
            for side in sides) + " |")
    both = rows["concurrent"]
    lines.append(f"| {both['callers']} paragraphs at once: wall s (loops: {both['callers']}x one) | "
                 f"{num(both['ours_wall_s'])} | {num(both.get('ours_sentence_jobs_wall_s'))} | "
                 f"{num(both.get('ours_linear_pace_wall_s'))} | {num(both.get('ours_wide_seams_wall_s'))} | "
                 f"{num(both['loop_sentence_x4_s'])} | {num(both['loop_chunk_x4_s'])} |")
    if "ours_decoded_per_heard" in both:
        lines.append(f"| {both['callers']} paragraphs at once: frames decoded per frame heard | "
                     f"{num(both['ours_decoded_per_heard'])} | "
                     f"{num(both.get('ours_sentence_jobs_decoded_per_heard'))} | "
                     f"{num(both.get('ours_linear_pace_decoded_per_heard'))} | "
                     f"{num(both.get('ours_wide_seams_decoded_per_heard'))} | 1 | 1 |")
    second, short = rows["second_caller"], rows["short"]
    lines.append(f"| second caller {second['after_s']} s in: its first byte s | {num(second['ours_first_s'])} | | | "
                 f"| | {num(second['loop_chunk_first_s'])} |")
    lines.append(f"| short sentence alone: first byte s | {num(short['ours_first_s'])} "
                 f"(one-shot: {num(short['ours_one_shot_first_s'])}) | | | | {num(short['loop_first_s'])} | |")
    for size, words in (("short", 6), ("long", 35)):
        answer = rows.get("answers", {}).get(size)
        if answer:
            ours, loop, wide = answer["ours"], answer["loop"], answer.get("ours_wide_seams")
            lines.append(f"| {words} words alone: first byte / total / CPU s | {_answer(ours)} | | | "
                         f"{_answer(wide) if wide else ''} | {_answer(loop)} | |")
    lines += ["", "| ratio | measured | at most | |", "|---|---|---|---|"]
    for target in record["targets"]:
        bound = "" if target["at_most"] is None else num(target["at_most"])
        label = RATIOS.get(target["ratio"], target["ratio"])
        lines.append(f"| {label} | {num(target['value'])} | {bound} | {_met(target)} |")
    load = ", ".join(str(x) for x in record["load_average_after"])
    stolen = "not recorded" if "steal_share" not in record else f"{100 * record['steal_share']:.1f} %"
    lines += ["", f"`{record['command']}`: {record['engine']} engine, loop = {record['loop']}, voice "
              f"`{record['voice']}`, {record['sentences']} sentences, {record['rounds']} round(s) interleaved, "
              f"decoder pace at warm-up {num(record['decoder_pace'])}{_fitted(record)}, {record['cpus']} CPUs, "
              f"load average after {load}, CPU time stolen by the hypervisor {stolen}, {num(record['seconds'], 's')}."]
    return lines


def barge_in(*records: Results) -> list[str]:
    """bench/barge_in.py: first audio after a barge-in over a fresh one's, with and without halting."""
    lines = ["| engine | first audio, fresh (ms) | right after a cancel (ms) | ratio (goal <= 1.2) | "
             "no_halt: after a cancel (ms) | no_halt ratio |", "|---|---|---|---|---|---|"]
    for r in records:
        ours, old = r["summary"]["production"], r["summary"]["no_halt"]
        lines.append(f"| {r['engine']} ({r['model_dir']}) | {ours['fresh_ms_median']:.0f} | "
                     f"{ours['after_cancel_ms_median']:.0f} | {ours['ratio_median']:.2f} | "
                     f"{old['after_cancel_ms_median']:.0f} | {old['ratio_median']:.2f} |")
    runs = "; ".join(f"{r['engine']} {r['when']}, {r['rounds']} rounds, load {r['machine']['loadavg_before']}"
                     for r in records)
    return lines + ["", "`bench/results/barge_in-*.json` (`make bench-barge-in`): medians over rounds, each round "
                    "both servers on one model; the long answer cancelled "
                    f"{records[0]['hold_s']} s after its first audio. {runs}."]


#: Which library reads each language (kokoro's own G2P; kokoro_server/languages.py).
G2P = {"a": "misaki en", "b": "misaki en", "e": "espeak-ng es", "f": "espeak-ng fr-fr", "h": "espeak-ng hi",
       "i": "espeak-ng it", "j": "misaki ja (fugashi + unidic-lite)", "p": "espeak-ng pt-br",
       "z": "misaki zh (jieba, pypinyin)"}


def _caption(record: Results) -> str:
    return f"`bench/results/languages.json`: `make bench-languages` of {record['date']}, {record['machine']}."


def languages(record: Results) -> list[str]:
    """Per language: its test voice, whether the model was sent kokoro's own reading, seconds a character."""
    lines = ["| `lang` | language | G2P | voice tested | model sent kokoro's reading | not the English reading "
             "| seconds per character (vs English) |", "|---|---|---|---|---|---|---|"]
    for row in record["rows"]:
        english = "(is English)" if row["lang"] in ("a", "b") and not row["sent_differs_from_english"] else (
            "yes" if row["sent_differs_from_english"] else "**no**")
        lines.append(f"| `{row['lang']}` | {row['language']} | {G2P[row['lang']]} | `{row['voice']}` | "
                     f"{'yes' if row['sent_equals_kokoro'] else '**no**'} | {english} | "
                     f"{row['s_per_char']:.3f} ({row['s_per_char_vs_english']:.2f}x) |")
    return lines + ["", _caption(record)]


def language_packages(record: Results) -> list[str]:
    """What the other languages' G2P adds to the image, and what each reader costs on first use."""
    lines = ["| package | version | installed (du) |", "|---|---|---|"]
    lines += [f"| `{name}` | {p['version']} | {num(p['du_mib'], 'MiB')} |"
              for name, p in record["g2p_packages"].items()]
    lines += [f"| all | | {num(record['g2p_packages_du_mib'], 'MiB')} |", "",
              "| `lang` | first use, s | resident memory growth, MiB |", "|---|---|---|"]
    lines += [f"| `{code}` | {num(c['first_use_s'])} | {num(c['rss_growth_mib'])} |"
              for code, c in record["reader_first_use"].items()]
    return lines + ["", _caption(record)]


#: bench/side_by_side.py's ratios, in the order docs/throughput.md reads them.
SIDE_BY_SIDE_CASES = {
    "short": "6 words", "long": "35 words", "paragraph": "paragraph (8 sentences)",
    "second_caller": "6 words sent 0.3 s into a paragraph", "concurrent": "4 paragraphs at once",
}


def side_by_side(record: Results, *, source: str = "side_by_side-torch.json") -> list[str]:
    """Ours against Kokoro-FastAPI: each case's medians, then ours / theirs per round's pair."""
    ratios = {t["ratio"]: t for t in record["targets"]}
    lines = ["| case | ours: first byte / first speech / total s | Kokoro-FastAPI: first byte / first speech / total s "
             "| first byte ratio | first speech ratio | total ratio | CPU per request ratio | CPU per audio s ratio |",
             "|---|---|---|---|---|---|---|---|---|"]

    def times(side: dict[str, float]) -> str:
        return " / ".join(num(side[key]) if key in side else "-" for key in ("first_s", "speech_s", "total_s"))

    for name, label in SIDE_BY_SIDE_CASES.items():
        row = record["rows"].get(name)
        if row is None:
            continue
        total_key = "concurrent_wall" if name == "concurrent" else f"{name}_total"
        cells = []
        for key in (f"{name}_first", f"{name}_speech", total_key, f"{name}_cpu", f"{name}_cpu_per_audio"):
            target = ratios.get(key)
            cells.append("" if target is None else num(target["value"]) + (
                "" if target["met"] is None else (" (met)" if target["met"] else " (**not met**)")))
        lines.append(f"| {label} | {times(row['ours'])} | {times(row['theirs'])} | " + " | ".join(cells) + " |")
    load = ", ".join(str(x) for x in record["load_average_after"])
    return lines + ["", f"`bench/results/{source}` ({record['when']}): `{record['command']}`; "
                    f"Kokoro-FastAPI {record['kokoro_fastapi']}, model `{record['model_dir']}`, voice "
                    f"`{record['voice']}`, {record['rounds']} rounds interleaved, ratios ours / theirs as the median "
                    f"of the rounds' own ratios (goal: at most 1.0 where marked), {record['cpus']} CPUs, load average "
                    f"after {load}, {num(record['seconds'], 's')}."]


def sentence_ttfa(record: Results) -> list[str]:
    """bench.paired --measure sentence_ttfa: first audio of a 6- and a 35-word sentence per variant."""
    lines = ["| variant | 6 words, first audio ms | 35 words, first audio ms | 35 / 6 (median of rounds) | rounds |",
             "|---|---|---|---|---|"]
    for row in record["summary"]:
        lines.append(f"| {row['variant']} | {num(row['short_ms'])} | {num(row['long_ms'])} | {num(row['ratio'])} | "
                     f"{', '.join(num(r) for r in row['ratio_by_round'])} |")
    return lines + ["", f"`bench/results/sentence_ttfa-onnx.json` (`python -m bench.paired ... --measure "
                    f"sentence_ttfa`): {paired_variants(record)}; decoder pace {num(record['decoder_pace'])} for all, "
                    f"{record['rounds']} rounds, the variants' order rotating."]


def onnx_ops(record: Results, *, shown: int = 8) -> list[str]:
    """bench.onnx_ops: the int8 vocoder's kernel time by operator, one thread against all cores."""
    cores = record["threads"]["all_cores"]
    lines = [f"| operator | share of a run on {cores} threads | s on 1 thread | s on {cores} | speedup |",
             "|---|---|---|---|---|"]
    rows = record["ops"]
    for row in rows[:shown]:
        lines.append(f"| {row['op']} | {num(row['share'])} | {num(row['one_thread_s'])} | {num(row['all_cores_s'])} | "
                     f"{num(row['speedup'])} |")
    rest = rows[shown:]
    lines.append(f"| {len(rest)} others | {num(round(sum(r['share'] for r in rest), 4))} | "
                 f"{num(round(sum(r['one_thread_s'] for r in rest), 4))} | "
                 f"{num(round(sum(r['all_cores_s'] for r in rest), 4))} | |")
    walls = record["median_wall_s"]
    return lines + ["", f"`bench/results/onnx_ops.json` (`python -m bench.onnx_ops`, {record['when']}): the vocoder "
                    f"part over one sentence ({record['frames']} frames; its `text`), medians of {record['rounds']} "
                    "rounds; "
                    f"a run took {num(walls['one_thread'])} s on 1 thread and {num(walls['all_cores'])} s on {cores} "
                    "(onnxruntime's profiler on, kernel time only)."]


def torch_layout(*records: Results) -> list[str]:
    """bench.torch_layout: the torch decoder in kokoro's layout and with each time-major rewrite."""
    lines = ["| model | frames | kokoro's layout s | convolutions time-major | and AdaIN as one batch norm | "
             "and Snake in place (the engine) | the engine's audio from kokoro's |", "|---|---|---|---|---|---|---|"]
    for record in records:
        rows = {row["variant"]: row for row in record["rows"]}
        lines.append(f"| {record['model_dir']} | {record['frames']} | {num(rows['kokoro']['median_s'])} | "
                     + " | ".join(f"{num(rows[v]['median_s'])} s ({num(rows[v]['over_kokoro'])}x)"
                                  for v in ("convolutions", "adain", "engine"))
                     + f" | {num(rows['engine']['error_db'])} dB below |")
    first = records[0]
    return lines + ["", f"`bench/results/torch_layout-*.json` (`python -m bench.torch_layout`, {first['when']} and "
                    f"{records[-1]['when']}): the decoder over one sentence (its `text`, voice af_heart), on "
                    f"{first['threads']} torch threads, medians of {first['rounds']} rounds, the variants' order "
                    "rotating; each column adds one rewrite to the one before it."]
