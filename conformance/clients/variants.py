"""Client variants for the suite's own proofs."""

VARIANTS: dict = {}
