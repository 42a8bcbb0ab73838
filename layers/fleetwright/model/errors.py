"""Errors in user documents that name the file, the document, the object and the field path."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DocumentRef:
    """Where a document came from: file path and 0-based index within a multi-document YAML file."""

    file: str
    index: int = 0
    kind: str = ""
    name: str = ""

    def describe(self) -> str:
        """``examples/x.yaml: document 2 (NodePool default)``."""
        what = f" ({self.kind} {self.name})" if self.kind or self.name else ""
        return (
            f"{self.file}: document {self.index}{what}".replace("  ", " ")
            .replace("( ", "(")
            .replace(" )", ")")
        )


class DocumentError(ValueError):
    """A document that cannot be accepted. ``str()`` gives one line per problem, each fully located."""

    def __init__(self, ref: DocumentRef, problems: list[tuple[str, str]]) -> None:
        """``problems`` is a list of ``(field path, message)``; an empty path means the whole document."""
        self.ref = ref
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        """Every problem on its own line: ``file: document N (Kind name): field.path: message``."""
        lines = []
        for path, message in self.problems:
            location = f"{self.ref.describe()}: {path}" if path else self.ref.describe()
            lines.append(f"{location}: {message}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class DocumentWarning:
    """A non-fatal note about a document, e.g. a deprecated API version converted to v1."""

    ref: DocumentRef
    message: str

    def render(self) -> str:
        """``file: document N (Kind name): warning: message``."""
        return f"{self.ref.describe()}: warning: {self.message}"
