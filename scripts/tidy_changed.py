#!/usr/bin/env python3
"""Which sources clang-tidy must re-check since the last commit that passed it.

    tidy_changed.py RECORD BUILD_DIR FILE...   prints the FILEs (repository-relative .cpp paths)
                                                to check, one a line

RECORD holds "commit fingerprint" of the last run that passed on a clean tree (scripts/tidy.sh
writes it). Every FILE is printed when RECORD is missing, unreadable, names a commit that is not
an ancestor of HEAD, or carries another fingerprint (clang-tidy version and .clang-tidy). Else a
FILE is printed when it, or any header its object file was compiled from, differs between that
commit and the work tree (committed, staged, unstaged or untracked). The headers come from the
compiler's dependency files (CMake's `<object>.d`, beside the object that the compile command's -o names),
so a change to a header re-checks every source that includes it, directly or not; a source with
no dependency file is re-checked.
"""
import json
import os
import shlex
import subprocess
import sys


def git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def changed_since(commit):
    names = set(git("diff", "--name-only", commit).split())
    names |= set(git("ls-files", "--others", "--exclude-standard").split())
    root = git("rev-parse", "--show-toplevel").strip()
    return {os.path.realpath(os.path.join(root, n)) for n in names}


def object_of(command):
    """The -o argument of a compile command (CMake 3.25's database has no "output" field)."""
    args = shlex.split(command)
    return args[args.index("-o") + 1] if "-o" in args[:-1] else None


def dependencies(build_dir):
    """source path -> set of real paths of everything its object depends on (None: unknown)."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    deps = {}
    for e in entries:
        src = os.path.realpath(os.path.join(e["directory"], e["file"]))
        out = e.get("output") or object_of(e.get("command", ""))
        depfile = os.path.join(e["directory"], out + ".d") if out else None
        if not depfile or not os.path.exists(depfile):
            deps[src] = None
            continue
        with open(depfile) as f:
            text = f.read().replace("\\\n", " ")
        paths = set()
        for line in text.splitlines():
            if ":" not in line:
                continue
            for p in line.split(":", 1)[1].split():
                paths.add(os.path.realpath(os.path.join(e["directory"], p)))
        deps[src] = paths
    return deps


def main():
    record, build_dir, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    fingerprint = os.environ.get("DISTCROWN_TIDY_FINGERPRINT", "")
    try:
        commit, recorded_fingerprint = open(record).read().split()
        ok = recorded_fingerprint == fingerprint
        ok = ok and subprocess.run(["git", "merge-base", "--is-ancestor", commit, "HEAD"],
                                   capture_output=True).returncode == 0
    except (OSError, ValueError):
        ok = False
    if not ok:
        print("\n".join(files))
        return
    changed = changed_since(commit)
    deps = dependencies(build_dir)
    for f in files:
        real = os.path.realpath(f)
        d = deps.get(real)
        if real in changed or d is None or d & changed:
            print(f)


if __name__ == "__main__":
    main()
