"""Seeded synthetic LLM-agent conversations in every message shape (the newer ones converted
from the Chat Completions conversation).

The demo, the benchmarks and the TUI need realistic, reproducible agent traffic (tool-heavy
turns, parallel calls, heavy-tailed output sizes, mixed content and scripts) without network
access or third-party packages. Big outputs are assembled from pools of pre-varied lines, so
50,000 messages take a few seconds, while line numbers, timestamps and ids keep text varied.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from functools import partial
from itertools import accumulate, chain, count, islice
from math import gcd
from typing import Any, Literal

Shape = Literal["openai", "anthropic", "mixed", "responses", "gemini", "bedrock", "genai"]
CONVERTED = ("responses", "gemini", "bedrock", "genai")
"""Shapes written by converting the Chat Completions conversation (:mod:`ctxkit.shapes.convert`)."""
Message = dict[str, Any]

__all__ = ["DEFAULT_SYSTEM_PROMPT", "Message", "Shape", "Workload", "conversation"]

DEFAULT_SYSTEM_PROMPT = (
    "You are ctx-agent, a coding assistant working inside a sandboxed git repository.\n"
    "Tools: read_file(path, offset?, limit?), grep(pattern, path, glob?), run_tests(path, args?),"
    " bash(command, timeout?), web_fetch(url, prompt?), list_dir(path),"
    " edit_file(path, old_string, new_string).\n"
    "Read before you edit, keep diffs small, run the tests after every change and report what"
    " you changed and why. Never invent file contents; quote tool output when unsure."
)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _lines(text: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in text.strip().splitlines())


_NOUNS = _words(
    "config header token cache buffer session record chunk window message request payload schema"
    " index budget summary context manifest queue worker route prompt result"
)
_VERBS = _words(
    "load parse render fetch build merge split flush encode decode resolve validate normalize"
    " compact prune index score emit apply retry"
)
_CLASSES = _words(
    "ContextWindow TokenBudget MessageStore Compactor Summarizer ToolRouter SessionCache"
    " PromptBuilder RetryPolicy EventLog ChunkIndex"
)
_PKGS = _words("core io tools store render cli util net")
_MODS = _words("json os re asyncio pathlib hashlib itertools logging sqlite3")
_EXCS = _words("ValueError KeyError TypeError RuntimeError TimeoutError OSError")
_ADJS = _words("cold warm large small slow fast noisy stale nested sparse")
_VARS = _words("result value items buf out entry node chunk acc pending")
_TYPES = _lines("str\nint\nbytes\nlist[str]\ndict[str, int]\nPath\nMessage\nfloat | None")
_UNICODE = _words("✅ ❌ 🚀 🔥 ⚠️ 🐛 ✨ 👍 → ≈ café naïve Zürich “quoted” — … ±0.5% Ω λ résumé")


def _third_person(verb: str) -> str:
    return verb + ("es" if verb.endswith(("ch", "sh", "s", "x")) else "s")


def _py_path(r: random.Random) -> str:
    if r.random() < 0.7:
        return f"src/ctx/{r.choice(_PKGS)}/{r.choice(_NOUNS)}.py"
    return f"tests/test_{r.choice(_NOUNS)}.py"


def _pick(options: tuple[str, ...]) -> Callable[[random.Random], str]:
    return lambda r: r.choice(options)


_SLOT_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "noun": _pick(_NOUNS),
    "verb": _pick(_VERBS),
    "verbs": lambda r: _third_person(r.choice(_VERBS)),
    "fn": lambda r: f"{r.choice(_VERBS)}_{r.choice(_NOUNS)}",
    "cls": _pick(_CLASSES),
    "path": _py_path,
    "adj": _pick(_ADJS),
    "exc": _pick(_EXCS),
    "num": lambda r: str(r.randrange(2, 100) if r.random() < 0.6 else r.randrange(100, 9000)),
    "big": lambda r: str(r.randrange(10, 10**6)),
    "ms": lambda r: f"{r.uniform(0.1, 900):.1f}",
    "hex": lambda r: f"{r.getrandbits(32):08x}",
    "pkg": _pick(_PKGS),
    "mod": _pick(_MODS),
    "v": _pick(_VARS),
    "typ": _pick(_TYPES),
    "unit": _pick(_words("ms KB tokens µs requests lines")),
    "lvl": _pick(_words("INFO INFO INFO INFO INFO INFO DEBUG DEBUG WARN ERROR")),
    "http": _pick(_words("GET POST PUT DELETE")),
    "code": _pick(_words("200 200 200 201 304 404 500")),
}

_SENTENCES = _lines("""
    The {noun} {verbs} each {noun2} before it reaches the {noun3}.
    If `{fn}()` returns {num}, the {noun} is considered stale and gets rebuilt.
    This keeps the {noun} under {num} {unit} even when the {noun2} grows quickly.
    We measured {num} {unit} per {noun} on a {adj} {noun2}, which is fine for now.
    See `{path}` for how the {noun} interacts with the {noun2}.
    Note that `{fn}` is not thread-safe; take a lock if workers share the {noun}.
    `{cls}` stores the {noun} and the {noun2} side by side so lookups stay cheap.
    Most {noun}s are small, but a few {adj} ones dominate the total {noun2} size.
    The {adj} path skips validation, so callers must pass a well-formed {noun}.
    When the {noun} is full, the oldest {noun2} is evicted first.
    Calling `{fn}` twice is harmless because the {noun} is cached by key.
    A {adj} {noun} usually means the {noun2} was never flushed.
""")
_USER = _lines("""
    Can you find out why `test_{fn}` fails on CI?
    Please refactor `{fn}` in {path} so it doesn't {verb} the {noun} twice.
    The {noun} gets too big after ~{num} messages. Any ideas?
    Add a test for `{fn}` covering the empty {noun} case.
    Run the test suite and fix whatever is broken.
    Why is {path} so slow? It takes {num} ms per {noun}.
    Rename `{cls}` to something clearer and update the callers.
    Look at the {adj} {noun} handling in {path} and tell me if it's safe.
    Can you read the docs for `{mod}` and check we use it correctly?
""")
_PREAMBLES = _lines("""
    Let me look at `{path}` first.
    I'll search for usages of `{fn}`.
    Running the tests to see the current state.
    Checking how `{cls}` builds the {noun}.
    Now I'll update `{fn}` and re-run the tests.
""")
_REPLIES = _lines("""
    Done: `{fn}` now {verbs} the {noun} only once.
    All {num} tests pass now.
    I found the problem: `{fn}` {verbs} the {noun} before the {noun2} is ready.
    Short answer: the {adj} {noun} path in `{path}` was the bottleneck.
    I changed `{cls}` so the {noun} is built lazily.
""")
_SYSTEM_NOTES = _lines("""
    Reminder: the user switched to plan mode.
    Reminder: the user switched back to edit mode.
    Context was compacted; earlier tool outputs were summarized.
    Token budget remaining: {big} tokens.
    Note: web_fetch is temporarily unavailable.
    The user's working directory is now src/ctx/{pkg}.
""")
_LOGS = _lines("""
    level={lvl} logger=ctx.{pkg}.{noun} msg="{fn} done" dur_ms={ms} n={num}
    level={lvl} logger=ctx.{pkg}.cache msg="cache miss" key={noun}:{hex} size={big}
    level={lvl} logger=ctx.http msg="{http} /api/{noun}s/{big} {code}" ms={ms} req={hex}{hex2}
    level={lvl} logger=ctx.{pkg}.compact msg="compacted context" before={big} after={num}
    level={lvl} logger=ctx.{pkg}.{noun} msg="retrying {fn}" attempt={num} backoff_ms={ms}
""")
# Per language: subjects, circumstances, outcomes, an optional timing clause, a user request.
_CJK = {
    "zh": (
        _words("这个函数 缓存层 上下文窗口 工具调用的结果 测试用例 日志系统 配置文件"),
        _words("在处理大文件时 在高并发情况下 每次请求之后 在压缩历史记录时 在启动阶段"),
        _words("会抛出异常 占用太多内存 返回了错误的结果 变得非常慢 需要重新计算令牌数"),
        "，大约需要{}毫秒",  # noqa: RUF001 - a Chinese comma is the point
        "请帮我看看为什么 `test_{fn}` 在 CI 上失败了。",
    ),
    "ja": (
        _words("この関数は キャッシュ層は コンテキストウィンドウは ツールの結果は 設定ファイルは"),
        _words("大きなファイルを読むときに 同時実行が多いと 履歴を圧縮するときに 起動直後に"),
        _words("例外を投げます メモリを使いすぎます 間違った結果を返します とても遅くなります"),
        "、約{}ミリ秒かかります",
        "`{fn}` のテストが失敗する原因を調べてください。",
    ),
}
_CLASS_BLOCK = (
    *_lines("""
    class {cls}:
    ~# Keeps the {noun} and its {noun2} together; {adj} entries are dropped first.
    ~def __init__(self, {noun}: {typ}) -> None:
    ~~self.{noun} = {noun}
    ~~self._{noun2}: dict[str, int] = {{}}
"""),
    "",
)
# One statement per line; "|" separates lines of a compound statement, "~" is one indent.
_STMTS = tuple(
    tuple(part.replace("~", "    ") for part in line.split("|"))
    for line in _lines("""
        {v} = {fn}({noun}, {num})
        if {v} is None:|~raise {exc}(f"missing {noun}: {{{noun}!r}}")
        for {v2} in {noun}:|~total += len({v2})  # {adj} path
        logger.debug("{fn2} took %.2f ms", elapsed)
        {v} = {{k: w for k, w in {noun2}.items() if w > {num}}}
        with open({v2}, encoding="utf-8") as fh:|~{v} = json.load(fh)
        try:|~{v} = {cls}({noun}).{verb}()|except {exc} as exc:|~logger.warning("{verb}: %s", exc)
        assert {v} >= 0, "{noun} must be non-negative"
        # TODO: {verb} the {noun2} lazily once the {adj} path is gone
        {v}.append({fn2}({v2}))
    """)
)
_TOOLS = ("read_file", "grep", "bash", "run_tests", "edit_file", "list_dir", "web_fetch")
_TOOL_WEIGHTS = (30, 15, 18, 10, 12, 8, 7)
# (cumulative probability, low, high): ~75% < 2 KB, 20% 2-20 KB, 4% 20-80 KB, 1% 100-200 KB.
_SIZE_BUCKETS = (
    (0.75, 40, 2_000),
    (0.95, 2_000, 20_000),
    (0.99, 20_000, 80_000),
    (1.0, 100_000, 200_000),
)
_LOG_DELTAS = (0.0, 0.001, 0.004, 0.013, 0.052, 0.2, 1.3)
_POOL_SIZES = {"zh": 512, "ja": 512, "block": 512, "record": 1024, "test": 1024}  # else 4096
_TINY = {
    "code": '     1\t"""Package marker."""',
    "grep": "No matches found.",
    "log": "(no output)",
    "ls": "total 0",
    "md": "TODO: write docs.",
    "pytest": "no tests ran in 0.01s",
}
_ERRORS = {
    "read_file": "Error: FileNotFoundError: [Errno 2] No such file or directory: '{path}'",
    "grep": "Error: re.error: unterminated character set at position {num}",
    "edit_file": "Error: old_string not found in {path}; the file may have changed.",
    "list_dir": "Error: NotADirectoryError: [Errno 20] Not a directory: '{path}'",
    "web_fetch": "Error: HTTP 503 Service Unavailable after {num} ms (TimeoutError)",
}
_RULE = "=" * 30
_PYTEST_COUNTS = (
    ("FAILED", "failed"),
    ("PASSED", "passed"),
    ("SKIPPED", "skipped"),
    ("XFAIL", "xfailed"),
)
# "<output kind> <command or url>"
_BASH = _lines("""
    log tail -n 2000 logs/{noun}.log
    ls ls -la src/ctx/{pkg}
    grep grep -rn '{fn}' src/
    json curl -s localhost:8080/api/{noun}s
    pytest python -m pytest -q tests/test_{noun}.py
    log journalctl -u ctx-worker --since '-1h'
""")
_URLS = _lines("""
    md https://docs.python.org/3/library/{mod}.html
    json https://api.example.com/v1/{noun}s?page={num}
    zh https://zh.example.org/wiki/{cls}
    ja https://blog.example.jp/{noun}-{num}
""")
_LS_NAMES = _words("{noun}.py test_{fn}.py {noun}_{verb}.json {fn}.md {noun}-{num}.log")


def _fit(text: str, size: int) -> str:
    """Cut to at most size chars, at a line break (else a space) when one is close enough."""
    if len(text) <= size:
        return text
    for sep in ("\n", " "):
        cut = text.rfind(sep, 0, size + 1)
        if cut > size // 2:
            return text[:cut]
    return text[:size]


class _Slots(dict[str, str]):
    """Template slots drawn on first use: `{noun}` repeats within a template, `{noun2}` is an
    independent draw."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def __missing__(self, key: str) -> str:
        value = self[key] = _SLOT_MAKERS[key.rstrip("0123456789")](self.rng)
        return value


class _Engine:
    """All mutable generation state of one message stream, so streams never interfere."""

    def __init__(
        self, rng: random.Random, shape: Shape, system_prompt: str, cap: int, id_tag: str
    ) -> None:
        self.rng, self.shape, self.system_prompt, self.cap = rng, shape, system_prompt, cap
        self.id_tag, self.ids, self.lang = id_tag, 0, "en"
        self._pools: dict[str, list[Any]] = {}
        self._avg: dict[str, float] = {}

    def fill(self, template: str) -> str:
        return template.format_map(_Slots(self.rng))

    def pool(self, kind: str, want: int) -> list[Any]:
        """Pools of pre-varied lines make big outputs cheap. A pool grows by about what is
        drawn from it (so short conversations stay cheap) up to its size; after that a few
        entries are redrawn on every use so it keeps drifting."""
        make = getattr(self, f"_make_{kind}", None) or partial(self._make_cjk, kind)
        pool = self._pools.setdefault(kind, [])
        grow = min(_POOL_SIZES.get(kind, 4096) - len(pool), max(16, want))
        if grow > 0:
            pool += [make() for _ in range(grow)]
            flat = list(chain.from_iterable(pool)) if kind == "block" else pool
            self._avg[kind] = sum(map(len, flat)) / len(flat) + 1
            self._avg[kind + "_n"] = len(flat) / len(pool)
        else:
            for _ in range(1 + want // 64):
                pool[self.rng.randrange(len(pool))] = make()
        return pool

    def _many(self, kind: str, size: float, extra: int = 0, slack: float = 1.15) -> list[Any]:
        """Enough pool entries to fill size chars (extra: chars each line gains, slack: how
        much to overshoot); callers trim.

        Entries are distinct while the pool allows, so long outputs do not repeat lines: a
        random start and a stride coprime to the pool size visit each entry once, which is
        much cheaper than random.sample (the entries themselves are already random)."""
        if kind not in self._avg:
            self.pool(kind, 16)
        k = int(size / (self._avg[kind] + extra) / self._avg[kind + "_n"] * slack) + 1
        pool = self.pool(kind, k)
        n, stride = len(pool), self.rng.randrange(1, len(pool))
        while gcd(stride, n) != 1:
            stride = self.rng.randrange(1, n)
        start = self.rng.randrange(n)
        return [pool[i % n] for i in range(start, start + k * stride, stride)]

    # -- pool entries -------------------------------------------------------------------
    def _make_en(self) -> str:
        r = self.rng
        text = self.fill(r.choice(_SENTENCES))
        text += " " + r.choice(_UNICODE) if r.random() < 0.04 else ""
        x = r.random()
        return text + (
            self.fill("\n\n## The {adj} {noun}\n\n") if x < 0.03 else "\n\n" if x < 0.18 else " "
        )

    def _cjk_sentence(self, lang: str) -> str:
        r = self.rng
        subj, when, what, timing, _ = _CJK[lang]
        mid = timing.format(r.randrange(2, 900)) if r.random() < 0.3 else ""
        return r.choice(subj) + r.choice(when) + r.choice(what) + mid + "。"

    def _make_log(self) -> str:
        return self.fill(self.rng.choice(_LOGS))

    def _make_grep(self) -> str:
        return self.fill("{path}:{num}:    ") + self._stmt(_Slots(self.rng))[0]

    def _make_cjk(self, lang: str) -> str:
        return self._cjk_sentence(lang) + ("\n\n" if self.rng.random() < 0.15 else "")

    def _stmt(self, s: _Slots, indent: str = "") -> list[str]:
        return [indent + line.format_map(s) for line in self.rng.choice(_STMTS)]

    def _make_block(self) -> list[str]:
        r, s = self.rng, _Slots(self.rng)
        if r.random() < 0.12:
            return ["from ctx.{pkg}.{noun} import {cls}".format_map(s), f"import {s['mod']}", ""]
        if r.random() < 0.15:
            return [line.replace("~", "    ").format_map(s) for line in _CLASS_BLOCK]
        lines = [
            "def {fn}({noun}: {typ}, limit: int = {num}) -> {typ2}:".format_map(s),
            '    """{verb} the {noun} without touching the {noun2}."""'.format_map(s),
        ]
        for _ in range(r.randrange(2, 8)):
            lines += self._stmt(s, "    ")
        return [*lines, f"    return {s['v']}", ""]

    def _make_record(self) -> str:
        r = self.rng
        rec: dict[str, Any] = {
            "name": _SLOT_MAKERS["fn"](r),
            "status": r.choice(("ok", "pending", "failed")),
            "score": round(r.random(), 4),
            "size_bytes": r.randrange(10, 10**6),
            "tags": r.sample(_PKGS, r.randrange(3)),
            "updated_at": f"2024-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d}T"
            f"{r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}Z",
        }
        if r.random() < 0.04:
            rec["note"] = self._cjk_sentence(r.choice(("zh", "ja"))) + r.choice(_UNICODE)
        return json.dumps(rec, ensure_ascii=False)[1:-1]

    def _make_ls(self) -> str:
        r = self.rng
        if r.random() < 0.2:
            perm, name = "drwxr-xr-x", self.fill("{noun}_{verb}/")
        else:
            perm = r.choice(("-rw-r--r--", "-rw-r--r--", "-rwxr-xr-x"))
            name = self.fill(r.choice(_LS_NAMES))
        size = r.randrange(10, 4000) if r.random() < 0.6 else r.randrange(4000, 3_000_000)
        size = 4096 if perm[0] == "d" else size
        return (
            f"{perm} {r.randrange(1, 9):>2} dev dev {size:>9} "
            f"{r.choice(('Jan', 'Mar', 'May', 'Aug', 'Nov'))} {r.randrange(1, 29):>2} "
            f"{r.randrange(24):02d}:{r.randrange(60):02d} {name}"
        )

    def _make_test(self) -> str:
        test, r = self.fill("tests/test_{noun}.py::test_{fn}"), self.rng
        if r.random() < 0.3:
            test += f"[{r.choice(('empty', 'large', 'unicode', 'case'))}-{r.randrange(100)}]"
        return test

    # -- tool outputs -------------------------------------------------------------------
    def _prose(self, size: int, lang: str = "en", title: bool = True) -> str:
        chars = size if lang == "en" else size // 3  # CJK is 3 bytes per char in UTF-8
        head = self.fill("# {cls}: the {adj} {noun}\n\n") if title and size > 400 else ""
        return _fit(head + "".join(self._many(lang, chars)), chars).rstrip() or "(empty)"

    def _code(self, size: int, start: int = 1) -> str:
        lines = chain.from_iterable(self._many("block", size, extra=7))
        return _fit("\n".join(map("{:>6}\t{}".format, count(start), lines)), size)

    def _log(self, size: int) -> str:
        lines = self._many("log", size, extra=18)
        ts = accumulate(
            self.rng.choices(_LOG_DELTAS, k=len(lines)),
            initial=1_715_000_000 + self.rng.randrange(10_000_000),
        )
        return _fit("\n".join(map("ts={:.3f} {}".format, ts, lines)), size)

    def _json(self, size: int) -> str:
        r = self.rng
        if size < 160:
            return json.dumps({"ok": r.random() < 0.8, "count": r.randrange(100), "cursor": None})
        records = self._many("record", size - 90, 18, 1.0)
        items = ",\n    ".join(map('{{"id": {}, {}}}'.format, count(r.randrange(10**6)), records))
        return (
            f'{{\n  "items": [\n    {items}\n  ],\n  "total": {len(records)},\n'
            f'  "next_cursor": "{r.getrandbits(64):016x}"\n}}'
        )

    def _listing(self, size: int) -> str:
        lines = sorted(self._many("ls", size, 0, 1.0), key=lambda line: line.rsplit(" ", 1)[-1])
        return _fit(f"total {8 * len(lines)}\n" + "\n".join(lines), size)

    def _pytest(self, size: int, failing: bool) -> str:
        r = self.rng
        fails = [self._make_test() for _ in range(r.randrange(1, 4) if failing else 0)]
        if size < 700:  # quiet mode
            dots = r.choices(".....s", k=max(1, min(60, size // 8)))
            summary = "".join(f"FAILED {t} - AssertionError\n" for t in fails)
            return (
                f"{''.join(dots)}{'F' * len(fails)} [100%]\n{summary}"
                f"{f'{len(fails)} failed, ' if fails else ''}{dots.count('.')} passed in "
                f"{r.uniform(0.05, 3):.2f}s"
            )
        sections, short = [], []
        for test in fails:
            s, (file, name) = _Slots(r), test.split("::")
            err = "AssertionError: assert {num} == {num2}".format_map(s)
            sections += [
                f"{'_' * 20} {name} {'_' * 20}\n",
                f"    def {name.split('[')[0]}():",
                *self._stmt(s, "        "),
                ">       assert {v} == {num2}".format_map(s),
                f"E       {err}",
                "E        +  where {num} = {fn}({noun})\n".format_map(s),
                f"{file}:{r.randrange(5, 400)}: AssertionError\n",
            ]
            short.append(f"FAILED {test} - {err}")
        fail_text = f"{_RULE} FAILURES {_RULE}\n" + "\n".join(sections) if fails else ""
        tests = self._many("test", max(40, size - len(fail_text) - 300), 17, 1.0)
        status = r.choices(("PASSED", "SKIPPED", "XFAIL"), weights=(94, 5, 1), k=len(tests))
        for test in fails:
            at = r.randrange(len(tests) + 1)
            tests.insert(at, test)
            status.insert(at, "FAILED")
        k = len(tests)
        pct = (i * 100 // k for i in range(1, k + 1))
        body = "\n".join(map("{} {} [{:>3}%]".format, tests, status, pct))
        head = (
            f"{_RULE} test session starts {_RULE}\nplatform linux -- Python 3.11.7, pytest-"
            f"8.3.2, pluggy-1.5.0\nrootdir: /work/repo\ncollected {k} items"
        )
        counts = ((status.count(word), label) for word, label in _PYTEST_COUNTS)
        tail = ", ".join(f"{n} {label}" for n, label in counts if n)
        summary = f"{_RULE} short test summary info {_RULE}\n" + "\n".join(short) if fails else ""
        foot = f"{_RULE} {tail} in {r.uniform(0.5, 90):.2f}s {_RULE}"
        return "\n\n".join(part for part in (head, body, fail_text, summary, foot) if part)

    def _traceback(self, size: int) -> str:
        r, frames = self.rng, ["Traceback (most recent call last):"]
        for _ in range(r.randrange(2, 7)):
            s = _Slots(r)
            frames += [
                f'  File "/work/repo/{s["path"]}", line {s["num"]}, in {s["fn"]}',
                self._stmt(s, "    ")[0],
            ]
        frames += [self.fill("{exc}: {adj} {noun} '{fn}' could not be processed"), "exit status 1"]
        tb = "\n".join(frames)
        return (self._log(size - len(tb) - 1) + "\n" + tb) if size > len(tb) + 300 else tb

    def _render(self, kind: str, size: int, args: dict[str, Any]) -> str:
        if kind == "md" and self.lang != "en" and self.rng.random() < 0.5:
            kind = self.lang
        if size < 40 and kind in _TINY:
            return _TINY[kind]
        if kind == "edit":
            head = (
                f"The file {args['path']} has been updated. Here's the result of running "
                "`cat -n` on a snippet of the edited file:\n"
            )
            if size < len(head) + 40:
                return f"Edited {args['path']}: replaced 1 occurrence."
            return head + self._code(size - len(head), self.rng.randrange(1, 600))
        if kind in ("zh", "ja"):
            return self._prose(size, kind)
        return {
            "code": lambda n: self._code(n, args.get("offset", 1)),
            "md": self._prose,
            "json": self._json,
            "log": self._log,
            "ls": self._listing,
            "pytest": partial(self._pytest, failing=False),
            "grep": lambda n: _fit("\n".join(self._many("grep", n)), n),
        }[kind](size)

    def _error(self, tool: str, args: dict[str, Any], size: int) -> str:
        if tool == "run_tests" or (tool == "bash" and "pytest" in args["command"]):
            return self._pytest(size, failing=True)
        return self._traceback(size) if tool == "bash" else self.fill(_ERRORS[tool])

    def _args(self, tool: str) -> tuple[dict[str, Any], str]:
        """Plausible arguments for a call plus the kind of output they should produce."""
        r, s = self.rng, _Slots(self.rng)
        if tool == "read_file":
            ext, kind = r.choices(
                (("py", "code"), ("json", "json"), ("md", "md"), ("log", "log")),
                weights=(75, 10, 12, 3),
            )[0]
            args: dict[str, Any] = {
                "path": s["path"] if ext == "py" else self.fill(f"docs/{{noun}}_{{verb}}.{ext}")
            }
            if ext == "py" and r.random() < 0.3:
                args.update(offset=r.randrange(1, 800), limit=r.choice((50, 100, 200, 400)))
            return args, kind
        if tool == "bash":
            kind, command = r.choice(_BASH).split(" ", 1)
            return {"command": self.fill(command), "timeout": r.choice((30, 120, 600))}, kind
        if tool == "run_tests":
            extra = ["-k", s["fn"]] if r.random() < 0.3 else []
            return {
                "path": self.fill("tests/test_{noun}.py"),
                "args": ["-x", "-q", *extra],
            }, "pytest"
        if tool == "edit_file":
            old = self._stmt(s, "    ")[0]
            return {
                "path": s["path"],
                "old_string": old,
                "new_string": old + self.fill("  # {verb} the {noun} first"),
            }, "edit"
        if tool == "grep":
            pattern = self.fill(r.choice(("def {fn}", r"{cls}\(", "TODO|FIXME", "import {mod}")))
            return {"pattern": pattern, "path": "src/", "glob": "*.py"}, "grep"
        if tool == "list_dir":
            return {"path": self.fill("src/ctx/{pkg}")}, "ls"
        kind, url = r.choice(_URLS).split(" ", 1)
        return {"url": self.fill(url), "prompt": self.fill("How does {mod} handle {noun}s?")}, kind

    def _target_size(self) -> int:
        r, x = self.rng, self.rng.random()
        _, lo, hi = next(bucket for bucket in _SIZE_BUCKETS if x < bucket[0])
        return max(1, min(self.cap, int(lo * (hi / lo) ** r.random())))  # log-uniform in bucket

    def _capped(self, text: str) -> str:
        if len(text) * 4 <= self.cap or len(data := text.encode()) <= self.cap:
            return text
        return data[: self.cap].decode("utf-8", "ignore")

    # -- messages -----------------------------------------------------------------------
    def _say(self, templates: tuple[str, ...]) -> str:
        if self.lang == "en":
            return self.fill(self.rng.choice(templates))
        return self._cjk_sentence(self.lang) + self._cjk_sentence(self.lang)

    def tool_round(self, shape: Shape) -> list[Message]:
        r = self.rng
        if shape == "mixed":
            shape = r.choice(("openai", "anthropic"))
        calls = []
        for _ in range(r.choices((1, 2, 3), weights=(70, 20, 10))[0]):
            tool = r.choices(_TOOLS, weights=_TOOL_WEIGHTS)[0]
            args, kind = self._args(tool)
            size, failed = self._target_size(), r.random() < 0.10
            out = self._error(tool, args, size) if failed else self._render(kind, size, args)
            self.ids += 1
            calls.append((f"{self.id_tag}{self.ids:06d}", tool, args, self._capped(out), failed))
        text = self._say(_PREAMBLES) if r.random() < 0.5 else None
        if shape == "openai":
            return [
                {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [
                        {
                            "id": f"call_{cid}",
                            "type": "function",
                            "function": {"name": tool, "arguments": json.dumps(args)},
                        }
                        for cid, tool, args, _, _ in calls
                    ],
                },
                *(
                    {"role": "tool", "tool_call_id": f"call_{cid}", "content": out}
                    for cid, _, _, out, _ in calls
                ),
            ]
        blocks = [{"type": "text", "text": text}] if text else []
        blocks += [
            {"type": "tool_use", "id": f"toolu_{cid}", "name": tool, "input": args}
            for cid, tool, args, _, _ in calls
        ]
        results = [
            {"type": "tool_result", "tool_use_id": f"toolu_{cid}", "content": out}
            | ({"is_error": True} if failed else {})
            for cid, _, _, out, failed in calls
        ]
        return [{"role": "assistant", "content": blocks}, {"role": "user", "content": results}]

    def turn(self, index: int) -> list[Message]:
        r = self.rng
        shape = self.shape if self.shape != "mixed" else r.choice(("openai", "anthropic"))
        self.lang = r.choices(("en", "zh", "ja"), weights=(90, 5, 5))[0]
        msgs: list[Message] = []
        if index == 0:
            msgs.append({"role": "system", "content": self.system_prompt})
        elif r.random() < 1 / 40:
            msgs.append({"role": "system", "content": self.fill(r.choice(_SYSTEM_NOTES))})
        ask = self.fill(r.choice(_USER) if self.lang == "en" else _CJK[self.lang][4])
        if r.random() < 0.08:
            ask += f"\n\nHere's what I see:\n```\n{self._traceback(r.randrange(200, 3000))}\n```"
        if shape == "anthropic" and r.random() < 0.4:
            msgs.append({"role": "user", "content": [{"type": "text", "text": ask}]})
        else:
            msgs.append({"role": "user", "content": ask})
        for _ in range(r.choices((1, 2, 3, 4), weights=(35, 30, 20, 15))[0]):
            msgs += self.tool_round(shape)
        reply = self._say(_REPLIES) + " " + self._prose(r.randrange(80, 900), self.lang, False)
        if self.lang == "en" and r.random() < 0.25:
            code = "\n".join(chain.from_iterable(r.choices(self.pool("block", 2), k=2))).rstrip()
            reply += f"\n\n```python\n{code}\n```"
        reply += " " + r.choice(_UNICODE) if r.random() < 0.1 else ""
        content = [{"type": "text", "text": reply}] if shape == "anthropic" else reply
        return [*msgs, {"role": "assistant", "content": content}]


class Workload:
    """A reproducible synthetic agent conversation; all randomness derives from `seed`."""

    def __init__(
        self,
        *,
        seed: int = 0,
        shape: Shape = "openai",
        system_prompt: str | None = None,
        max_output_bytes: int = 200_000,
    ) -> None:
        if shape not in ("openai", "anthropic", "mixed", *CONVERTED):
            raise ValueError(f"unknown shape {shape!r}")
        if max_output_bytes < 1:
            raise ValueError("max_output_bytes must be positive")
        self.seed, self.shape, self.max_output_bytes = seed, shape, max_output_bytes
        self.system_prompt = DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt
        self._rounds: _Engine | None = None

    def _engine(self, stream: str, id_tag: str) -> _Engine:
        # A string seed is hashed with SHA-512 by `random`: stable across runs and platforms.
        rng = random.Random(f"ctxkit.workload:{self.seed}:{stream}")
        shape = "openai" if self.shape in CONVERTED else self.shape
        return _Engine(rng, shape, self.system_prompt, self.max_output_bytes, id_tag)

    def _written(self, messages: list[Message]) -> list[Message]:
        """Messages in this workload's shape: the newer shapes are the same conversation,
        converted without loss."""
        if self.shape not in CONVERTED:
            return messages
        from ctxkit.shapes.convert import convert

        return convert(messages, self.shape)  # type: ignore[arg-type]

    def turns(self) -> Iterator[list[Message]]:
        """Endless iterator of turns; each turn is the list of messages of that turn, in order.
        The first turn starts with the system message. "mixed" picks a shape per turn (seeded).
        Each call starts the same conversation afresh."""
        engine = self._engine("turns", "")
        for index in count():
            yield self._written(engine.turn(index))

    def messages(self, n: int) -> list[Message]:
        """The first n messages of the conversation (cut at n exactly, even mid-turn)."""
        if n < 0:
            raise ValueError("n must be >= 0")
        return list(islice(chain.from_iterable(self.turns()), n))

    def tool_round(self) -> list[Message]:
        """One assistant message with 1-3 parallel calls followed by all its results: the unit an
        agent loop adds per step (used by benchmarks). Successive calls continue one seeded
        stream whose ids (`call_r000001`) never collide with those of `messages()`, so rounds
        can be appended to a generated conversation."""
        if self._rounds is None:
            self._rounds = self._engine("rounds", "r")
        return self._written(
            self._rounds.tool_round("openai" if self.shape in CONVERTED else self.shape)
        )


def conversation(n: int, *, seed: int = 0, shape: Shape = "openai") -> list[Message]:
    """Shorthand for Workload(seed=seed, shape=shape).messages(n)."""
    return Workload(seed=seed, shape=shape).messages(n)
