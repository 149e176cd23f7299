#!/usr/bin/env python3
"""Size limits on the library's sources (src/): no function over 150 lines, no class or struct over
400 (docs/architecture.md). Functions are measured by lizard (PyPI, in the project's virtual
environment); classes by their braces, from the line of `class X`/`struct X` to its closing brace.
Exits 1 with one line per function or class over its limit.   check_sizes.py [FILE...]"""
import pathlib
import re
import sys

import lizard

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_FUNCTION = 150
MAX_CLASS = 400
CLASS = re.compile(r"^\s*(?:template\s*<[^>]*>\s*)?(class|struct)\s+(\w+)[^;{]*\{", re.M)


def strip(text):
    """The text with comments, string and character literals blanked (newlines kept)."""
    out = re.sub(r"//[^\n]*", "", text)
    out = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), out, flags=re.S)
    return re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', '""', out)


def classes(path):
    text = strip(path.read_text())
    for m in CLASS.finditer(text):
        depth = 0
        for i in range(m.end() - 1, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    first = text.count("\n", 0, m.start(1)) + 1
                    last = text.count("\n", 0, i) + 1
                    yield m.group(2), first, last - first + 1
                    break


def main(files):
    paths = [pathlib.Path(f) for f in files] or sorted(
        p for p in (ROOT / "src").rglob("*") if p.suffix in (".cpp", ".hpp"))
    bad = []
    for p in paths:
        rel = p.resolve().relative_to(ROOT)
        for f in lizard.analyze_file(str(p)).function_list:
            if f.length > MAX_FUNCTION:
                bad.append(f"{rel}:{f.start_line}: function {f.name} has {f.length} lines "
                           f"(at most {MAX_FUNCTION})")
        for name, line, length in classes(p):
            if length > MAX_CLASS:
                bad.append(f"{rel}:{line}: class {name} has {length} lines (at most {MAX_CLASS})")
    for line in bad:
        print("check_sizes: " + line)
    if not bad:
        print(f"check_sizes: {len(paths)} files, functions <= {MAX_FUNCTION} lines, "
              f"classes <= {MAX_CLASS}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
