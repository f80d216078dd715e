#!/usr/bin/env python3
"""Checks the relative links of the repository's Markdown files: every target file exists, and every
#anchor into a Markdown file names one of its headings (GitHub's slugs). Exit 1 with a list if not.

    python3 docs/check-links.py [FILE.md ...]     # default: every tracked *.md
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(md):
    seen = {}
    out = set()
    in_fence = False
    for line in md.read_text().splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence or not line.startswith("#"):
            continue
        base = slug(re.sub(r"`", "", line.lstrip("#")))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else "%s-%d" % (base, n))
    return out


def links(md):
    in_fence = False
    for no, line in enumerate(md.read_text().splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            yield no, m.group(1) or m.group(2)


def check(md):
    problems = []
    for no, target in links(md):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists():
            problems.append("%s:%d: %s: no such file" % (md.relative_to(ROOT), no, target))
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append("%s:%d: %s: no such heading" % (md.relative_to(ROOT), no, target))
    return problems


def main(argv):
    files = [Path(a).resolve() for a in argv] or [
        ROOT / f for f in subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True,
                                         check=True).stdout.split()]
    problems = [p for f in files for p in check(f)]
    for p in problems:
        print(p)
    print("check-links: %d files, %d broken links" % (len(files), len(problems)), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
