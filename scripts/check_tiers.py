#!/usr/bin/env python3
"""Every ctest entry of BUILD_DIR carries exactly one tier label, `quick` or `full`
(tests/CMakeLists.txt), so that `scripts/test.sh` and `scripts/test.sh --all` together run every
test.   check_tiers.py BUILD_DIR"""
import json
import subprocess
import sys

TIERS = {"quick", "full"}


def main():
    out = subprocess.run(["ctest", "--test-dir", sys.argv[1], "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    bad = []
    counts = {t: 0 for t in TIERS}
    tests = json.loads(out)["tests"]
    for t in tests:
        labels = set()
        for p in t.get("properties", []):
            if p["name"] == "LABELS":
                labels = set(p["value"])
        tiers = labels & TIERS
        if len(tiers) != 1:
            bad.append(f"{t['name']}: labels {sorted(labels)}")
        else:
            counts[tiers.pop()] += 1
    if bad:
        print("ctest entries without exactly one tier label (quick or full):", *bad, sep="\n  ")
        sys.exit(1)
    print(f"tiers: {len(tests)} ctest entries, {counts['quick']} quick and {counts['full']} full")


if __name__ == "__main__":
    main()
