"""Summarise a compute-sanitizer racecheck log: each hazard pair (first access, the other) as
file:line, with how many "and" lines of the reports named it, grouped under the case line that followed
them (sanitize_*_dev.py prints a case's line after its calls, so its reports come first).

    compute-sanitizer --tool racecheck python3 scripts/sanitize_decode_dev.py > race.log 2>&1
    python3 scripts/racecheck_pairs.py race.log
"""

import collections
import re
import sys

ACCESS = re.compile(r"(?:Race reported between|and) (Write|Read) access at .* in (?:.*/)?([^/\s]+:\d+)")


def main(path: str) -> int:
    pending: collections.Counter = collections.Counter()
    first = None
    total = 0
    for line in open(path, errors="replace"):
        m = ACCESS.search(line)
        if m:
            here = f"{m.group(1)} {m.group(2)}"
            if "Race reported between" in line:
                first = here
            elif first is not None:  # one "and" line per other access of the report
                pending[(first, here)] += 1
                total += 1
            continue
        text = line.rstrip()
        # the program's own lines (a case's line, its summary) and the tool's summary
        if (text and not text.startswith("=========")) or "RACECHECK SUMMARY" in text:
            print(text)
            for (a, b), n in sorted(pending.items()):
                print(f"    {n:5d}  {a}  /  {b}")
            pending.clear()
    for (a, b), n in sorted(pending.items()):
        print(f"    {n:5d}  {a}  /  {b}")
    print(f"report pairs: {total}")
    return total


if __name__ == "__main__":
    main(sys.argv[1])
