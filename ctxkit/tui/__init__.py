"""The ``ctxkit inspect`` terminal inspector."""
