#!/usr/bin/env python3
"""Keeps the headline table at the top of bench/README.md current: a bench script calls
`bench/headline.py KEY WHAT BERTH BASELINE RATIO TARGET` after its run, and the row of KEY is
written (added, or replaced) between the table's markers, with today's date."""
import datetime
import pathlib
import sys

START, END = "<!-- headline:start -->", "<!-- headline:end -->"
HEADER = ["| Key | Measure | Berth | Baseline | Ratio | Target | Measured |",
          "|---|---|---:|---|---:|---:|---|"]


def main() -> int:
    if len(sys.argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    key, what, berth, baseline, ratio, target = sys.argv[1:]
    readme = pathlib.Path(__file__).with_name("README.md")
    text = readme.read_text()
    if START not in text or END not in text:
        print(f"{readme} has no {START} … {END} table", file=sys.stderr)
        return 1
    head, rest = text.split(START, 1)
    table, tail = rest.split(END, 1)
    rows = {}
    for line in table.strip().splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 7:
            rows[cells[0]] = cells
    today = datetime.date.today().isoformat()
    rows[key] = [key, what, berth, baseline, ratio, target, today]
    lines = list(HEADER)
    for cells in sorted(rows.values()):
        lines.append("| " + " | ".join(cells) + " |")
    readme.write_text(f"{head}{START}\n" + "\n".join(lines) + f"\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
