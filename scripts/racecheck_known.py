#!/usr/bin/env python3
"""Sorts a compute-sanitizer racecheck log of the 32-row narrow kernel's tests into the one known tool
artifact and everything else.

The artifact (docs/sanitizers.md, "The 32-row narrow kernel's consumer handoffs"): racecheck pairs consumer 0's reads of
a shared-memory handoff with consumer 1's writes after the next `bar.sync 1, 256`, or lane 0's `q_amax`
write with the reads after the barrier that follows it. Its own `--racecheck-trace-sync` trace shows the
writing warp past that barrier before the reading warp's arrival was recorded, which the hardware barrier
does not allow. A report counts as the artifact when both accesses are on the source lines of those
handoffs: the merge's `buffer[...]` and row-statistics `sm.merge[...]` stores and loads, `q_amax` stores and
loads. Anything else is printed and makes the exit status 1, as do reports the log counts but did not print (--print-limit).

Usage: racecheck_known.py LOG SOURCE_ROOT
"""
import re
import sys
from pathlib import Path

KNOWN_SNIPPETS = ("buffer[", "sm.merge[", "q_amax")
# The narrow kernel's sources; a report's file name is looked up there (racecheck prints base names).
NARROW_DIR = "src/kernels/sm90/decode/narrow"


def main() -> int:
    log_path, root = Path(sys.argv[1]), Path(sys.argv[2])
    text = log_path.read_text(errors="replace").splitlines()
    sources: dict[str, list[str]] = {}

    def line_of(name: str, number: int) -> str:
        if name not in sources:
            found = root / NARROW_DIR / name
            sources[name] = found.read_text().splitlines() if found.is_file() else []
        lines = sources[name]
        return lines[number - 1] if 0 < number <= len(lines) else ""

    known = other = 0
    i = 0
    while i < len(text):
        if "Race reported between" not in text[i]:
            i += 1
            continue
        # The report's access lines: this one and the "and ... access" lines that follow it.
        block = [text[i]]
        i += 1
        while i < len(text) and text[i].lstrip("= ").startswith("and "):
            block.append(text[i])
            i += 1
        sites = [re.search(r" in ([\w.]+):(\d+)", line) for line in block]
        ok = all(s and any(k in line_of(s.group(1), int(s.group(2))) for k in KNOWN_SNIPPETS) for s in sites)
        if ok:
            known += 1
        else:
            other += 1
            print("\n".join(block))
    summary = [line for line in text if "RACECHECK SUMMARY" in line]
    # "N hazards displayed (E errors, W warnings)": a report that was not printed cannot be sorted.
    counts = re.search(r"(\d+) hazards displayed \((\d+) errors, (\d+) warnings\)", summary[-1]) if summary else None
    unprinted = int(counts.group(2)) + int(counts.group(3)) - int(counts.group(1)) if counts else 0
    print(f"racecheck reports: {known} on the 32-row merge / q_amax handoffs (known tool artifact), {other} other"
          f"{f', {unprinted} not printed (raise --print-limit)' if unprinted > 0 else ''}"
          f"{'; ' + summary[-1].strip('= ') if summary else ''}")
    return 1 if other or unprinted > 0 else 0


if __name__ == "__main__":
    sys.exit(main())
