"""The suite as a pytest module: ``pytest --pyargs ctxkit.conformance.suite --ctxkit-target T``."""

from ctxkit.conformance.plugin import ConformanceSuite


class TestConformance(ConformanceSuite):
    """Checks the target named by --ctxkit-target (or CTXKIT_TARGET, or ctxkit_target)."""
