"""What a published model folder does not carry: the flags a loader writes into its configs that
only mean something on the machine that loaded it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

#: Written by ``from_pretrained(..., local_files_only=...)`` of a local folder into the saved
#: ``tokenizer_config.json`` (transformers 5); meaningless, and misleading, anywhere else.
LOCAL_ONLY = ("local_files_only", "is_local")
CONFIGS = ("config.json", "tokenizer_config.json")


def strip_local_flags(folder: Path, names: Sequence[str] = CONFIGS) -> list[str]:
    """Rewrite ``folder``'s configs without :data:`LOCAL_ONLY` keys; returns the files rewritten."""
    changed = []
    for name in names:
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and any(k in data for k in LOCAL_ONLY):
            for k in LOCAL_ONLY:
                data.pop(k, None)
            path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            changed.append(name)
    return changed
