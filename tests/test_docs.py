"""The README and the records beside it point at what exists: their section links and the repository files they name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "benchmarks").glob("*.md"))]
# Paths a command writes (studies/...) are outputs, not files of the repository.
REPOSITORY_PATH = re.compile(r"(?<![\w./-])((?:benchmarks|tests|autotune|workloads|search_spaces)/[\w./-]*\w)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_slug_follows_github() -> None:
    assert slug("What each fix bought (`autotune explain`)") == "what-each-fix-bought-autotune-explain"
    assert slug("Tuning on several GPUs and machines") == "tuning-on-several-gpus-and-machines"


def test_readme_section_links_resolve() -> None:
    text = (ROOT / "README.md").read_text()
    anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links, "the README's contents list is gone"
    assert [link for link in links if link not in anchors] == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_named_repository_files_exist(doc: Path) -> None:
    named = set(REPOSITORY_PATH.findall(doc.read_text()))
    assert [path for path in sorted(named) if not (ROOT / path).exists()] == []


def test_every_space_file_in_the_readme_loads(tmp_path: Path) -> None:
    # The format's example declared a condition over a knob below it, gave no default for a knob and constrained
    # knobs it did not have: a copy of it was refused at once ("names kernel, which is not a parameter declared
    # above it").
    from autotune.space import SearchSpace

    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    spaces = [block for block in blocks if "schema_version:" in block]
    assert len(spaces) >= 2, "the README's space files are gone"
    for number, block in enumerate(spaces):
        path = tmp_path / f"space{number}.yaml"
        path.write_text(block)
        space = SearchSpace.from_file(path)
        assert space.violated(space.defaults) is None
