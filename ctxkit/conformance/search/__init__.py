"""The Hypothesis search: drive a target and judge every step.

- ``conversations``: Hypothesis strategies for agent conversations in every shape, and budgets.
- ``machine``: the state machine that calls the target and checks each property after each step.
- ``cache_stability``: the advisory property of how much of each view a prompt cache could serve.
- ``minimize``: make a shrunk counterexample smaller still, then raise its budget.
"""
