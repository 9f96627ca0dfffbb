"""What each strategy keeps of a long conversation, side by side.

A long agent conversation (synthetic traffic, ``--messages`` long) with ``--facts`` planted
facts spread through its first 85%: half said by the user ("For the record: the staging port
of Vexaron is 8451."), half inside a tool's output among other lines (a ``lookup`` call and its
result). Then the user asks about each fact in turn ("Which staging port does Vexaron listen
on?"), the assistant answering "Let me check." between questions, and each question's view
(under ``--budget`` tokens) is searched for the fact's value. Per strategy:

* ``tokens``: the median view's tokens (of the budget);
* ``facts``: how many questions found their fact in the view (whole, summarized or recalled);
* ``ms/view``: the median time to make a question's view.

The strategies: ``truncate`` (the default window: ``truncate_outputs`` + ``truncate``),
``summarize`` (the window plus one running summary of what it left out, by the offline
extractive summarizer), ``hierarchical`` (older units as a paragraph or one line, extractive),
``recall`` (the window, and the units the question finds in an FTS5 memory: no model), and
``hierarchical+recall``. All offline and deterministic.

    python benchmarks/strategies.py                       # 3,000 messages, 20 facts
    python benchmarks/strategies.py --messages 600 --facts 6 --budget 8000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from agent_loop import history_of, machine

from ctxkit.messages import group_units, text_of, validate_history
from ctxkit.reference import ReferenceContextManager

STRATEGIES: list[tuple[str, dict[str, Any]]] = [
    ("truncate", {"strategies": ["truncate_outputs", "truncate"]}),
    ("summarize", {"strategies": ["truncate_outputs", "truncate", "summarize"]}),
    ("hierarchical", {"strategies": ["truncate_outputs", "hierarchical"]}),
    ("recall", {"strategies": ["truncate_outputs", "truncate"], "recall": {}}),
    ("hierarchical+recall", {"strategies": ["truncate_outputs", "hierarchical"], "recall": {}}),
]
SYLLABLES = ("vex", "ar", "on", "quil", "brix", "tor", "mad", "en", "zu", "lo", "rik", "sa", "fen")
PEOPLE = ["Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Edsger", "Frances"]
SUBJECTS = [
    # (what, how the value is said, the question)
    ("staging port", "{n}", "Which staging port does {name} listen on?"),
    ("on-call owner", "{person}", "Who is the on-call owner of {name}?"),
    ("release checksum", "{hex}", "What was the release checksum of {name}?"),
    ("rotation window", "{n} days", "What is the rotation window for {name}?"),
]


def made_up_name(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        if name not in taken:
            taken.add(name)
            return name


def fact_messages(
    number: int, subject: str, name: str, value: str, rng: random.Random
) -> list[dict[str, Any]]:
    """A fact said by the user, or found in a tool's output among other lines."""
    if number % 2 == 0:
        return [
            {"role": "user", "content": f"For the record: the {subject} of {name} is {value}."},
            {"role": "assistant", "content": "Noted."},
        ]
    call_id = f"call_fact_{number}"
    lines = [f"{name}.{key} = {rng.randint(1, 999)}" for key in ("replicas", "cpu", "shards")]
    lines.insert(rng.randrange(len(lines) + 1), f"{name}.{subject.replace(' ', '_')} = {value}")
    output = f"config of {name} ({len(lines)} keys)\n" + "\n".join(lines)
    arguments = json.dumps({"service": name})
    return [
        {"role": "user", "content": f"Look up the config of {name}."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "lookup_config", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": output},
        {"role": "assistant", "content": f"Here is the config of {name}."},
    ]


def conversation(
    size: int, facts: int, seed: int = 11
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The history with the facts planted at unit boundaries, and ``(question, value)`` per
    fact."""
    rng = random.Random(seed)
    traffic = [m for m in history_of(size, seed=seed) if m.get("role") != "system"]
    units = group_units(validate_history(traffic))
    cuts = sorted(
        rng.sample(range(int(0.05 * len(units)), int(0.85 * len(units))), min(facts, len(units)))
    )
    taken: set[str] = set()
    planted: dict[int, list[dict[str, Any]]] = {}
    questions = []
    for number, cut in enumerate(cuts):
        subject, said, question = SUBJECTS[number % len(SUBJECTS)]
        name = made_up_name(rng, taken)
        value = said.format(
            n=rng.randint(2000, 9999), person=rng.choice(PEOPLE), hex=f"{rng.getrandbits(40):010x}"
        )
        planted[units[cut].start] = fact_messages(number, subject, name, value, rng)
        questions.append((question.format(name=name), value))
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful agent."}]
    for index, message in enumerate(traffic):
        history += planted.get(index, [])
        history.append(message)
    rng.shuffle(questions)
    return history, questions


async def measure(
    config: dict[str, Any],
    history: list[dict[str, Any]],
    questions: list[tuple[str, str]],
    budget: int,
) -> dict[str, Any]:
    """Ask every question in turn; what each view held."""
    manager = ReferenceContextManager(max_tokens=budget, **config)
    try:
        await manager.set_messages(history)
        await manager.memory_synced()  # recall: the history stored first (not timed)
        await manager.get_messages_for_request()
        tokens, times, found = [], [], 0
        for question, value in questions:
            await manager.add_message({"role": "user", "content": question})
            started = time.perf_counter()
            view = await manager.get_messages_for_request()
            times.append(time.perf_counter() - started)
            tokens.append(manager.counter.count_messages(view))
            found += any(value in text_of(message) for message in view[:-1])
            await manager.add_message({"role": "assistant", "content": "Let me check."})
        return {
            "tokens": statistics.median(tokens),
            "facts": found,
            "ms_per_view": statistics.median(times) * 1e3,
        }
    finally:
        manager.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=3_000, help="traffic messages (3000)")
    parser.add_argument("--facts", type=int, default=20, help="planted facts (20)")
    parser.add_argument("--budget", type=int, default=16_000, help="tokens per view (16000)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    history, questions = conversation(args.messages, args.facts)
    counter = ReferenceContextManager().counter
    total = counter.count_messages(history)
    print(f"machine: {machine()}")
    print(
        f"{len(history):,} messages, {total:,} tokens; {len(questions)} planted facts, each "
        f"asked about at the end; budget {args.budget:,} tokens "
        f"({args.budget / total:.1%} of the history)\n"
    )
    header = f"{'strategy':<20} {'tokens':>8} {'of budget':>10} {'facts':>8} {'ms/view':>9}"
    print(header)
    print("-" * len(header))
    results: dict[str, Any] = {
        "machine": machine(),
        "messages": len(history),
        "history_tokens": total,
        "facts": len(questions),
        "budget": args.budget,
        "strategies": [],
    }
    for name, config in STRATEGIES:
        row = asyncio.run(measure(config, history, questions, args.budget))
        results["strategies"].append({"strategy": name, **row})
        print(
            f"{name:<20} {row['tokens']:>8,.0f} {row['tokens'] / args.budget:>10.0%} "
            f"{row['facts']:>4} / {len(questions):<2} {row['ms_per_view']:>9.2f}"
        )
        sys.stdout.flush()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
