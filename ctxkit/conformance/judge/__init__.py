"""What must hold, as pure functions and data.

- ``catalogue``: the property ids, levels and what each requires.
- ``invariants``: each property as a pure function over (history, view, events).
- ``comes_from``: which history message a view message comes from, as a provider reads it.
- ``parts``: tool calls, tool results and user turns read from every message shape.
- ``allow``: what ``--allow`` relaxes.
- ``step_checks``: the checks a run makes after each step, with the relaxations in force.
- ``steps``: what a run did to the manager, as data.
"""
