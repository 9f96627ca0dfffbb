"""The Hypothesis search: drive a target and judge every step.

- ``conversations``: Hypothesis strategies for agent conversations in every shape, and budgets.
- ``probe``: which message shapes a target takes, asked before the search.
- ``machine``: the state machine that calls the target and checks each property after each step.
- ``cache_stability``: the advisory property of how much of each view a prompt cache could serve.
- ``minimize``: make a shrunk counterexample smaller still, then raise its budget.
"""
