#!/usr/bin/env python3
"""Writes docs/misuse-catalogue.md from the misuse tests: one row per test method, with the
exception, verb and errno its first refused(...) asserts (or what it asserts instead).
Run from the repository root: python3 scripts/misuse-catalogue.py"""
import re, pathlib

SOURCES = [
    ("host, checked + unchecked", "verbs-core/src/test/java/org/verbs4j/MisuseCatalogueTest.java"),
    ("host, checked", "verbs-core/src/test/java/org/verbs4j/HostMisuseTest.java"),
    ("guest (rxe0)", "verbs-core/src/test/java/org/verbs4j/MemorySafetyGuestTest.java"),
    ("guest (rxe0)", "verbs-core/src/test/java/org/verbs4j/ResourceCyclesGuestTest.java"),
    ("host, pool", "verbs-core/src/test/java/org/verbs4j/pool/BufferPoolMisuseTest.java"),
    ("host, pool", "verbs-core/src/test/java/org/verbs4j/pool/BufferPoolTest.java"),
    ("host, pool", "verbs-core/src/test/java/org/verbs4j/pool/BufferPoolLeakTest.java"),
]

def words(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name).lower()

rows, total = [], 0
for tier, path in SOURCES:
    p = pathlib.Path(path)
    if not p.exists():
        continue
    src = p.read_text()
    nested = None
    for m in re.finditer(r"(class (\w+)[^{]*\{)|(@(?:Test|Property)[^\n]*\n\s*(?:public )?void (\w+)\(([^)]*)\)[^{]*\{)", src):
        if m.group(2):
            nested = m.group(2)
            continue
        name = m.group(4)
        rest = src[m.end():]
        nxt = re.search(r"\n\s*@(Test|Property|Nested)\b", rest)
        body = rest[:nxt.start()] if nxt else rest
        r = re.search(r"refused\((?:(\w+)\.class, )?\"([^\"]+)\", Errno\.(\w+)", body)
        t = re.search(r"assertThrows\((\w+)\.class", body)
        if r:
            outcome = f"`{r.group(1) or 'VerbsException'}` {r.group(3)} from `{r.group(2)}`"
        elif t:
            outcome = f"`{t.group(1)}`"
        else:
            outcome = "defined outcome, no crash (asserted in the test)"
        rows.append((tier, nested or "", words(name), outcome))
        total += 1

out = ["# The misuse catalogue", "",
       "Every misuse of the public API that the tests drive, with what it gets. Generated from the tests",
       "by `scripts/misuse-catalogue.py`; `MisuseCatalogueTest` runs twice (checked and unchecked mode),",
       "and the guest rows run on rxe0 in the Soft-RoCE guest. Each test asserts the outcome named here",
       "(the first refusal it checks; most check several). The design behind it: [memory-safety.md](memory-safety.md).", "",
       f"{total} test methods (each may check several misuses).", "",
       "| tier | group | misuse | outcome |", "|---|---|---|---|"]
for tier, group, name, outcome in rows:
    out.append(f"| {tier} | {group} | {name} | {outcome} |")
pathlib.Path("docs/misuse-catalogue.md").write_text("\n".join(out) + "\n")
print(f"docs/misuse-catalogue.md: {total} cases")
