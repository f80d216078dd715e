#!/usr/bin/env python3
"""Writes docs/misuse-catalogue.md from the misuse tests: one row per test method, with the
exception, verb and errno its first refused(...) asserts (or what it asserts instead).
Run from the repository root: python3 scripts/misuse-catalogue.py"""
import re, pathlib

SOURCES = [
    ("host, checked + unchecked", "verbs-core/src/test/java/org/verbs4j/MisuseCatalogueTest.java"),
    ("host, checked", "verbs-core/src/test/java/org/verbs4j/HostMisuseTest.java"),
    ("host, checked + unchecked", "verbs-core/src/test/java/org/verbs4j/CloseRacesHostTest.java"),
    ("guest (rxe0)", "verbs-core/src/test/java/org/verbs4j/CloseRacesGuestTest.java"),
    ("guest (rxe0)", "verbs-core/src/test/java/org/verbs4j/MemorySafetyGuestTest.java"),
    ("guest (rxe0)", "verbs-core/src/test/java/org/verbs4j/ResourceCyclesGuestTest.java"),
    ("host, pool, checked + unchecked", "verbs-core/src/test/java/org/verbs4j/pool/BufferPoolMisuseTest.java"),
    ("host, pool", "verbs-core/src/test/java/org/verbs4j/pool/BufferPoolTest.java"),
    ("host, pool", "verbs-core/src/test/java/org/verbs4j/pool/BufferPoolLeakTest.java"),
    ("host, waits", "verbs-core/src/test/java/org/verbs4j/BlockingWaitsHostTest.java"),
    ("host, extended CQ", "verbs-core/src/test/java/org/verbs4j/CompletionQueueExHostTest.java",
     r"Refused|refused|Error|Closed|Second"),
    ("host, waits", "verbs-core/src/test/java/org/verbs4j/TimedCallsHostTest.java"),
    ("host, extended QP, checked + unchecked", "verbs-core/src/test/java/org/verbs4j/ExtendedPostMisuseTest.java"),
    ("host, multicast, checked + unchecked", "verbs-core/src/test/java/org/verbs4j/MulticastMisuseTest.java"),
    ("host, on-demand paging", "verbs-core/src/test/java/org/verbs4j/OnDemandPagingHostTest.java", r"Refused|refused"),
    ("host, thread domains", "verbs-core/src/test/java/org/verbs4j/ThreadDomainHostTest.java", r"Refuse|Refusal|Checked"),
    ("host, XRC", "verbs-core/src/test/java/org/verbs4j/XrcHostTest.java", r"Refuse|Refusal|Checked"),
    ("host, device memory (ibv_alloc_dm)", "verbs-core/src/test/java/org/verbs4j/DeviceMemoryAllocationHostTest.java",
     r"Refused|Maximum"),
    ("guest (rxe0), waits", "verbs-core/src/test/java/org/verbs4j/BlockingWaitsGuestTest.java"),
    # connection management (org.verbs4j.cm) and device (GPU) memory: only the methods that drive a
    # misuse or a failure (the third element: a regex the method name must match)
    ("host, cm", "verbs-core/src/test/java/org/verbs4j/cm/CmHostTest.java",
     r"setupRefuses|addressArguments|withoutRdma"),
    ("guest (rxe0), cm", "verbs-core/src/test/java/org/verbs4j/cm/FailureModesGuestTest.java", None),
    ("guest (rxe0), cm", "verbs-core/src/test/java/org/verbs4j/cm/CloseGuestTest.java", None),
    ("guest (rxe0), cm", "verbs-core/src/test/java/org/verbs4j/cm/CmMisuseGuestTest.java", None),
    ("guest (rxe0), cm", "verbs-core/src/test/java/org/verbs4j/cm/CmSequencesGuestTest.java", None),
    ("guest (rxe0), cm", "verbs-core/src/test/java/org/verbs4j/cm/MulticastMisuseGuestTest.java", None),
    ("host, device memory", "verbs-core/src/test/java/org/verbs4j/DeviceMemoryHostTest.java",
     r"NoHostView|inline|Inline|registrationArguments|WithoutHostViews"),
    ("host, GPU (stand-in libcuda)", "verbs-gpudirect/src/test/java/org/verbs4j/gpudirect/GpuMemoryTest.java",
     r"Refused|driverErrors|cannotExport|CannotExport|noDriver"),
    ("host, GPU, checked + unchecked", "verbs-gpudirect/src/test/java/org/verbs4j/gpudirect/GpuMisuseCatalogueTest.java"),
    ("host, netty reads", "verbs-netty/src/test/java/org/verbs4j/netty/ReceivedByteBufTest.java", r"Refused"),
    ("host, netty loop configuration", "verbs-netty/src/test/java/org/verbs4j/netty/RdmaTransportConfigTest.java",
     r"Refused|refused"),
    ("guest (rxe0), netty receive cap", "verbs-netty/src/test/java/org/verbs4j/netty/SharedReceiveGuestTest.java", r"Refused"),
]

def words(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name).lower()

rows, total = [], 0
for source in SOURCES:
    tier, path, only = source if len(source) == 3 else (*source, None)
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
        if only and not re.search(only, name):
            continue
        rest = src[m.end():]
        nxt = re.search(r"\n\s*@(Test|Property|Nested)\b", rest)
        body = rest[:nxt.start()] if nxt else rest
        r = re.search(r"refused\(\s*(?:(\w+)\.class,\s*)?\"([^\"]+)\",\s*Errno\.(\w+)", body)
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
       f"Every misuse of the public API that the tests drive ({total} test methods, each may check several),",
       "with what it gets: the first refusal each asserts. Generated by `scripts/misuse-catalogue.py`; checked and",
       "unchecked mode; guest rows on rxe0 in the Soft-RoCE guest. Design: [memory-safety.md](memory-safety.md).", "",
       "| tier | group | misuse | outcome |", "|---|---|---|---|"]
for tier, group, name, outcome in rows:
    out.append(f"| {tier} | {group} | {name} | {outcome} |")
pathlib.Path("docs/misuse-catalogue.md").write_text("\n".join(out) + "\n")
print(f"docs/misuse-catalogue.md: {total} cases")
