"""Every relative link in the README, CONTRIBUTING.md, CHANGELOG.md and docs/*.md reaches a file
that exists and, when it names an anchor, a heading there. The README was split into docs pages
and their sections refer to each other by link; a renamed heading or a moved section would
otherwise leave a reader at a dead end with nothing failing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").glob("*.md")),
]

# `[text](target)`, the text possibly over several lines; images and autolinks are not used.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A fence may be indented (a code block inside a list item).
FENCE = re.compile(r"^ *```.*?^ *```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces made hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors a page's headings define (code blocks, where `#` starts a comment, skipped)."""
    text = FENCE.sub("", page.read_text())
    return {slug(h) for h in HEADING.findall(text)}


def links(page: Path) -> list[str]:
    """The page's links that stay in the repository (not a URL, not mail)."""
    text = FENCE.sub("", page.read_text())
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def broken(page: Path) -> list[str]:
    wrong = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            wrong.append(f"{target}: no such file")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            wrong.append(f"{target}: no heading with that anchor in {dest.name}")
    return wrong


def test_every_page_exists() -> None:
    assert [p for p in PAGES if not p.exists()] == []


def test_relative_links_and_anchors_resolve() -> None:
    problems = {str(p.relative_to(ROOT)): broken(p) for p in PAGES}
    assert {page: wrong for page, wrong in problems.items() if wrong} == {}


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    assert {p for p in (ROOT / "docs").glob("*.md") if p.resolve() not in linked} == set()


def test_the_checker_sees_a_broken_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n## Real part\n\n[a](#real-part), [b](#gone-part), [c](nope.md)\n")
    assert broken(page) == [
        "#gone-part: no heading with that anchor in page.md",
        "nope.md: no such file",
    ]
