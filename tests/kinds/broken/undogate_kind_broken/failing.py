"""A kind whose import fails, as a kind with a missing dependency would."""

raise RuntimeError("this kind needs a library that is not installed")
