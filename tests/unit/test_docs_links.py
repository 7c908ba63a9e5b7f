"""Every relative link in the repository's Markdown (README, docs/, data/ and the rest of
the checkout) leads somewhere: to a file that exists and, with a #fragment into Markdown,
to a heading there (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens, a
repeated heading numbered -1, -2). Links in code spans and fenced blocks are not links."""
from __future__ import annotations

import os
import re

from tests.conftest import ROOT

LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\(([^)\s]+)\)")
SKIP_DIRS = {".git", ".venv", ".venv-containernet", "results", "node_modules", "__pycache__"}


def markdown_files() -> list[str]:
    out = []
    for where, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".venv"))
        out += [os.path.join(where, f) for f in sorted(files) if f.endswith(".md")]
    return out


def slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("```"):
                fenced = not fenced
            m = None if fenced else re.match(r"^#{1,6} (.*)", line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
    return found


def broken_links(path: str, cache: dict[str, set[str]]) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)        # fenced blocks
    text = re.sub(r"`[^`\n]*`", "", text)                      # code spans
    out = []
    for _label, target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):            # http:, mailto:
            continue
        file, _, fragment = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            out.append(f"{target}: no such file")
        elif fragment and dest.endswith(".md"):
            if dest not in cache:
                cache[dest] = anchors(dest)
            if fragment not in cache[dest]:
                out.append(f"{target}: no such heading")
    return out


def test_every_relative_link_leads_to_a_file_and_heading_that_exist():
    cache: dict[str, set[str]] = {}
    files = markdown_files()
    assert len(files) > 50            # the walk found the docs
    bad = [f"{os.path.relpath(f, ROOT)}: {problem}" for f in files
           for problem in broken_links(f, cache)]
    assert bad == []


def test_the_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "b.md").write_text("# A heading, with (punctuation)\n\n## Twice\n## Twice\n")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#a-heading-with-punctuation) [twice](b.md#twice-1) "
                    "[gone](c.md) [no](b.md#nowhere) `[code](c.md)` [web](https://x.y/z)\n")
    assert broken_links(str(page), {}) == ["c.md: no such file",
                                           "b.md#nowhere: no such heading"]
