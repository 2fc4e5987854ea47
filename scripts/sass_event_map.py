"""One kernel's SASS as a run-length string of the instructions that matter for register
pressure and pipelining, to see where spills sit relative to the main loop (ptxas -v only
counts them). Runs on the GPU machine (needs cuobjdump and the built extension):

  python3 scripts/sass_event_map.py <mangled kernel name> [path/to/_C.so]

Letters: H HGMMA, W WARPGROUP.*, S STL / L LDL (local memory: spills), A ATOMG/RED, M UTMALDG
(TMA load), T UTMASTG (TMA store), B BAR.*, G STG / g LDG, R USETMAXREG, E EXIT; "H4" = 4 in a row.
"""
import glob
import re
import subprocess
import sys

TAGS = (("HGMMA", "H"), ("STL", "S"), ("LDL", "L"), ("ATOMG", "A"), ("RED", "A"), ("UTMASTG", "T"),
        ("UTMALDG", "M"), ("BAR", "B"), ("STG", "G"), ("LDG", "g"), ("WARPGROUP", "W"), ("USETMAXREG", "R"))


def main() -> None:
    name = sys.argv[1]
    so = sys.argv[2] if len(sys.argv) > 2 else glob.glob("cuda_llm_ops/_C*.so")[0]
    sass = subprocess.run(["cuobjdump", "-sass", "-fun", name, so], capture_output=True, text=True,
                          check=True).stdout
    runs: list[list] = []
    for line in sass.splitlines():
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", line)
        if not m:
            continue
        op = m.group(2)
        tag = "E" if op == "EXIT" else next((t for prefix, t in TAGS if op.startswith(prefix)), None)
        if tag is None:
            continue
        if runs and runs[-1][0] == tag:
            runs[-1][1] += 1
        else:
            runs.append([tag, 1])
    print(len(sass.splitlines()), "sass lines;", " ".join(f"{t}{n}" if n > 1 else t for t, n in runs))


if __name__ == "__main__":
    main()
