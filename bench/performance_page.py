#!/usr/bin/env python3
"""Writes docs/performance.md from benchmark reports (bench/report.hpp's report.md files).

    python3 bench/performance_page.py OUT [--recorded RECORDED.md] REPORT [REPORT ...]

Reports are taken newest first: by the date their header gives (bench/report.hpp writes one),
else by the commit that added them to git (followed through renames), else as given. Every
summary section of a report (targets, paired ratios, each
kind's own section, the all-kinds table, memory; not the per-family "Results" tables, which stay
in the report) is copied under the machine, compiler, flags, command and date of the run that
measured it. A section whose title a newer report already has is left out, so the page holds, per
subject, the latest run's figures; a section with only empty tables (a filtered run's families
it did not run) is left out too, and the targets table goes row by row (a filtered run's "not
measured" rows leave the older figures in place). RECORDED.md, if given, is appended as is: figures from filtered runs
that no whole report holds yet (decode, half precision, the Python package), each with its own
CPU, command and date.

The bench preset runs this on its own report (build/bench/report/performance.md); to refresh the
committed page, copy the new report into docs/benchmarks/ and run, from the repository root:

    python3 bench/performance_page.py docs/performance.md --recorded docs/performance-recorded.md \\
        docs/benchmarks/report-*.md
"""

import argparse
import re
import subprocess
import time
from pathlib import Path

HEADER_FIELDS = ("date", "CPU", "compiler", "flags", "SIMD", "load average (1, 5, 15 minutes)")
SKIPPED_SECTIONS = ("Results",)
DEFAULT_COMMAND = "cmake --workflow --preset bench` (report `build/bench/report/report.md`)"


def split_report(text):
    """(header bullets {field: value}, [(title, body)]) of one report.md."""
    header, sections, title, body = {}, [], None, []
    for line in text.splitlines():
        if line.startswith("## "):
            if title is not None:
                sections.append((title, "\n".join(body).strip("\n")))
            title, body = line[3:].strip(), []
        elif title is None:
            match = re.match(r"- ([^:]+): (.*)", line)
            if match:
                header[match.group(1)] = match.group(2)
        else:
            body.append(line)
    if title is not None:
        sections.append((title, "\n".join(body).strip("\n")))
    return header, sections


def subject(title):
    """What a section is about, without the run's parameters (after a colon or in parentheses)."""
    return re.split(r"[:(]", title)[0].strip().lower()


def target_rows(body, seen_rows):
    """The targets table of `body` without the rows a newer report measured or this run did not
    ("not measured"), or None when no row is left; adds the rows kept to seen_rows."""
    kept = []
    for line in body.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        is_row = line.startswith("|") and len(cells) >= 2 and not set(cells[0]) <= set("-") and cells[0] != "target"
        if is_row:
            if cells[1] == "not measured" or cells[0] in seen_rows:
                continue
            seen_rows.add(cells[0])
            kept.append(line)
        elif not kept or line.startswith("|"):
            kept.append(line)  # the text and header lines before the rows
    return "\n".join(kept) if any(line.startswith("|") and "---" not in line for line in kept[2:]) else None


def measured(body):
    """False for a section whose tables are all empty (a header row only): a filtered run's
    sections of the families it did not run."""
    tables, rows = [], 0
    for line in body.splitlines() + [""]:
        if line.startswith("|"):
            rows += 1
        elif rows:
            tables.append(rows)
            rows = 0
    return not tables or any(rows > 2 for rows in tables)


def run_date(path, header):
    if "date" in header:
        return header["date"]
    match = re.search(r"(\d{4}-\d{2}-\d{2})", path.name)
    return match.group(1) if match else "undated"


def age_key(path):
    """Seconds since the epoch at which the report was made (larger is newer)."""
    header, _ = split_report(path.read_text())
    if "date" in header:
        try:
            return time.mktime(time.strptime(header["date"], "%Y-%m-%d %H:%M UTC"))
        except ValueError:
            pass
    try:
        added = subprocess.run(["git", "log", "--follow", "--diff-filter=A", "--format=%ct", "--", path.name],
                               cwd=path.parent, capture_output=True, text=True, check=True).stdout.split()
        if added:
            return float(added[-1])
    except (OSError, subprocess.CalledProcessError):
        pass
    return float("-inf")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("reports", type=Path, nargs="+", help="report.md files")
    parser.add_argument("--recorded", type=Path, help="hand-recorded figures appended as they are")
    args = parser.parse_args()

    seen = set()
    parts = [
        "# attnkit performance\n",
        "Generated by `bench/performance_page.py` from the benchmark reports named below (newest first; per "
        "subject the latest run that measured it). Every ratio is measured in one process with the calls "
        "alternating (median of the per-pair ratios); absolute figures move 10-30% between runs on the shared "
        "machines they come from. The reports themselves (with every per-n table) are in "
        "[benchmarks/](benchmarks/); how a run is made: README \"Benchmarks\".\n",
    ]
    seen_rows = set()
    for path in sorted(args.reports, key=age_key, reverse=True):
        header, sections = split_report(path.read_text())
        kept = []
        for title, body in sections:
            if title in SKIPPED_SECTIONS or not measured(body):
                continue
            if subject(title) == "targets":  # row by row: each target's latest measurement
                body = target_rows(body, seen_rows)
                if body is not None:
                    kept.append((title, body))
            elif subject(title) not in seen:
                kept.append((title, body))
        if not kept:
            continue
        seen.update(subject(title) for title, _ in kept if subject(title) != "targets")
        parts.append(f"## From {path.name} ({run_date(path, header)})\n")
        command = header.get("command", "`" + DEFAULT_COMMAND).strip("`")
        parts.append(f"Command: `{command}`.\n" if "command" in header else f"Command: `{DEFAULT_COMMAND}.\n")
        parts.append("\n".join(f"- {field}: {header[field]}" for field in HEADER_FIELDS if field in header) + "\n")
        for title, body in kept:
            parts.append(f"### {title}\n\n{body}\n")
    if args.recorded:
        parts.append(args.recorded.read_text())
    args.out.write_text("\n".join(parts))


if __name__ == "__main__":
    main()
