"""One document model, written two ways: the markdown of RESULTS.md and
the terminal summary. Sections add blocks; `term` marks what the terminal
shows too (headings and tables by default, prose only when asked), `md`
what the markdown shows (all but the terminal's own forms)."""
from __future__ import annotations

import re


class Doc:
    def __init__(self):
        self.blocks: list[tuple[str, object, bool, bool]] = []  # kind, payload, term, md

    def h(self, text: str, level: int = 2, term: bool = True):
        self.blocks.append(("h", (level, text), term, True))

    def p(self, text: str, term: bool = False):
        self.blocks.append(("p", text, term, True))

    def table(self, head: list[str], rows: list[list], term: bool = True, align: str = ""):
        """align: one character per column, "r" right-aligns it in markdown."""
        self.blocks.append(("table", (head, [[str(c) for c in r] for r in rows], align), term, True))

    def bullets(self, items: list[str], term: bool = False, md: bool = True):
        self.blocks.append(("bullets", items, term, md))

    def code(self, lines: list[str]):
        self.blocks.append(("code", lines, False, True))

    def md(self, text: str, note: str = ""):
        """Stored markdown, as it is; the terminal shows `note` instead."""
        self.blocks.append(("md", (text, note), bool(note), True))


def _md_cell(c: str) -> str:
    return c.replace("|", "\\|").replace("\n", " ")


def markdown(doc: Doc) -> str:
    out = []
    for kind, x, _, md in doc.blocks:
        if not md:
            continue
        if kind == "h":
            out.append("#" * x[0] + " " + x[1] + "\n")
        elif kind == "p":
            out.append(x + "\n")
        elif kind == "table":
            head, rows, align = x
            out.append("| " + " | ".join(head) + " |")
            seps = ["---:" if i < len(align) and align[i] == "r" else "---" for i in range(len(head))]
            out.append("|" + "|".join(seps) + "|" if align else "| " + " | ".join(seps) + " |")
            out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
            out.append("")
        elif kind == "bullets":
            out += ["- " + i for i in x]
            out.append("")
        elif kind == "code":
            out += ["```sh", *x, "```", ""]
        elif kind == "md":
            out.append(x[0].rstrip("\n") + "\n")
    return "\n".join(out).rstrip("\n") + "\n"


def _plain(s: str) -> str:
    """Markdown emphasis and code marks off, for the terminal (a line in
    italics loses its underscores; names like __libc_start_main keep theirs)."""
    s = re.sub(r"\*\*|`", "", s)
    return s[1:-1] if len(s) > 1 and s[0] == "_" and s[-1] == "_" else s


def terminal(doc: Doc, width: int = 150) -> str:
    out = []
    for kind, x, term, _ in doc.blocks:
        if not term:
            continue
        if kind == "h":
            out.append(("\n" if out else "") + "#" * x[0] + " " + _plain(x[1]))
        elif kind == "p":
            out.append("  " + _plain(x))
        elif kind == "bullets":
            out += ["  - " + _plain(i) for i in x]
        elif kind == "md":
            out.append("  " + _plain(x[1]))
        elif kind == "table":
            head, rows, _ = x
            cells = [[_plain(c) for c in r] for r in [head, *rows]]
            widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(len(head))]
            if sum(widths) + 2 * len(widths) <= width:
                for r in cells:
                    out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
            else:  # too wide: one line per row, columns named
                for r in cells[1:]:
                    out.append("  " + r[0] + ": " + "; ".join(f"{h} {c}" for h, c in zip(cells[0][1:], r[1:])))
    return "\n".join(out) + "\n"
