"""The ctxkit conformance suite: properties any context manager should hold.

``ctxkit.conformance.invariants`` holds the properties as pure functions; it imports nothing heavy,
so production code may use it.
"""
