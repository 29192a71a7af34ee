"""Help in sections: a command with many options lists the ones most runs use first, then the rest under
headings, with its examples after them (click's own formatter: no dependency, nothing more to import for
`--help`). An option no section names is listed under "Other options", so a new option is never hidden."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

OTHER = "Other options"
# click's own cap on the width of an option list's first column (HelpFormatter.write_dl).
COLUMN_CAP = 30


class SectionedCommand(click.Command):
    """A click command whose --help groups its options: `sections` are (heading, option names) in order, an
    option named by its parameter name (`max_cost`); `examples` (lines, as in a \\b block) follow the options."""

    def __init__(
        self,
        *args: Any,
        sections: Sequence[tuple[str, Sequence[str]]] = (),
        examples: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.sections = [(heading, tuple(names)) for heading, names in sections]
        self.examples = tuple(examples)

    def grouped_params(self, ctx: click.Context) -> list[tuple[str, list[click.Parameter]]]:
        """The sections with their options, in order; options in no section last, under OTHER."""
        params = [p for p in self.get_params(ctx) if p.get_help_record(ctx) is not None]
        by_name = {p.name: p for p in params}
        placed: set[str | None] = set()
        groups: list[tuple[str, list[click.Parameter]]] = []
        for heading, names in self.sections:
            members = [by_name[name] for name in names if name in by_name and name not in placed]
            placed.update(p.name for p in members)
            if members:
                groups.append((heading, members))
        rest = [p for p in params if p.name not in placed]
        if rest:
            groups.append((OTHER, rest))
        return groups

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections = [
            (heading, [record for p in params if (record := p.get_help_record(ctx)) is not None])
            for heading, params in self.grouped_params(ctx)
        ]
        # click sizes each list's first column to its own longest option; one width for every section keeps
        # their descriptions in one column (options longer than click's cap still go on a line of their own).
        width = min(max((len(term) for _, records in sections for term, _ in records), default=0), COLUMN_CAP)
        for heading, records in sections:
            with formatter.section(heading):
                formatter.write_dl([(term.ljust(width), text) for term, text in records], col_max=COLUMN_CAP)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.examples:
            formatter.write_paragraph()
            formatter.write_text("Examples:")
            with formatter.indentation():
                for line in self.examples:
                    formatter.write(f"{' ' * formatter.current_indent}{line}\n")
        super().format_epilog(ctx, formatter)
