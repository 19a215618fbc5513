"""Build-time tools that write Kokoro model directories (packaged int8 export, hub snapshot, tiny
random model). Kept out of ``kokoro_server`` so the serving package holds only what it serves with;
the server imports ``packaged_weights`` lazily, when it must build the export at start."""
