"""``ctxkit survey``: the conformance suite over many targets at once, as a compatibility
matrix (:mod:`.matrix` the data, :mod:`.run` the parallel runs, :mod:`.render` the formats)."""
