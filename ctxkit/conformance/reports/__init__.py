"""What a run shows.

- ``results``: what a run found, as data: a status per property and the verdict.
- ``formats``: the summary table and the JSON and JUnit reports.
- ``reproducer``: a failing run's calls and check, written as a Python test.
- ``verify``: run a reproducer in a fresh process and see it fail for the run's reason.
"""
