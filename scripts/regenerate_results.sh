#!/usr/bin/env bash
# Re-measures the tables of docs/results.md that this machine can run, rewrites their CSVs (and
# the commit and date of each in docs/results_manifest.json), then re-renders docs/results.md and
# README.md's results table with scripts/results_page.py.
#
#   bash scripts/regenerate_results.sh --list           # each run: minutes, what it runs or why not
#   bash scripts/regenerate_results.sh                  # every run that fits (about 50 min, 2 cores)
#   bash scripts/regenerate_results.sh --only fsdp,tp   # those runs only (ids from --list)
#   bash scripts/regenerate_results.sh --full           # the sizes of the committed CSVs (longer)
#
# What each run executes is its "run" (or, with --full, "run_full") in docs/results_manifest.json,
# in `bash -euo pipefail` from the repository root with F (the fixtures), PY (the project's venv
# python), OUT (where the run writes its CSVs, plots and logs under their docs/ names) and TMP (its
# scratch folder) set. A run that fails, or writes fewer rows or other columns than expected, stops
# this script with exit status 1 and leaves that table's CSV as it was (--keep-going: carry on with
# the other runs, then exit 1). Runs that need a GPU or alpha-beta-CROWN or auto_LiRPA (not
# installed by scripts/setup.sh) are skipped with the reason, and keep their commit and date.
#
# The measured commit is HEAD: the script refuses to run with uncommitted changes under src/,
# include/ or the files the runs use (`python3 scripts/results_page.py sources`; --allow-dirty
# overrides, and the manifest then records HEAD with a "+dirty" suffix, which the page marks).
# Timing runs want the machine otherwise idle: each run's minutes in --list assume so.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
list=0 full=0 only="" dirty_ok=0 keep_going=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --list) list=1 ;;
    --full) full=1 ;;
    --only) only="${2:?--only needs IDs}"; shift ;;
    --only=*) only="${1#--only=}" ;;
    --allow-dirty) dirty_ok=1 ;;
    --keep-going) keep_going=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "regenerate_results: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

full_flag=()
[[ $full == 1 ]] && full_flag=(--full)
parts=$(python3 scripts/results_page.py list "${full_flag[@]}")

selected() {  # selected ID: in --only, or every part without --only
  [[ -z "$only" ]] && return 0
  [[ ",$only," == *",$1,"* ]]
}
if [[ -n "$only" ]]; then
  for id in ${only//,/ }; do
    cut -d$'\x1f' -f1 <<<"$parts" | grep -qx "$id" || { echo "regenerate_results: no run '$id' (see --list)" >&2; exit 2; }
  done
fi

if [[ $list == 1 ]]; then
  total=0
  while IFS=$'\x1f' read -r id minutes skip outputs run; do
    selected "$id" || continue
    if [[ -n "$skip" ]]; then
      printf '%-26s skipped: %s\n' "$id" "$skip"
    else
      printf '%-26s %3s min  -> %s\n' "$id" "$minutes" "$outputs"
      python3 -c 'import json,sys; [print("    " + l) for l in json.loads(sys.argv[1])]' "$run"
      total=$((total + minutes))
    fi
  done <<<"$parts"
  echo "total: about $total minutes on the 2-core VM$([[ $full == 1 ]] && echo ' (--full)')"
  exit 0
fi

F=${DISTCROWN_FIXTURES_DIR:-$ROOT/../shared/fixtures}
F=$(cd "$F" 2>/dev/null && pwd) || { echo "regenerate_results: no fixtures at ../shared/fixtures" >&2; exit 1; }
if [[ -f .venv-path ]]; then PY="$(cat .venv-path)/bin/python"; else PY="$HOME/.cache/distcrown/venv-torch-2.11.0/bin/python"; fi
[[ -x "$PY" ]] || { echo "regenerate_results: no venv python at $PY (run scripts/setup.sh)" >&2; exit 1; }
for b in distcrown bench_bounds bench_fsdp bench_tp bench_bab_memory fuzz_inputs; do
  [[ -x build/bin/$b ]] || { echo "regenerate_results: build/bin/$b missing (run scripts/setup.sh)" >&2; exit 1; }
done
export F PY OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

commit=$(git rev-parse --short=7 HEAD)
mapfile -t measured < <(python3 scripts/results_page.py sources)
measured+=(scripts/results_page.py scripts/plot_fsdp.py scripts/plot_tp.py scripts/plot_bab_parallel.py)
if [[ -n "$(git status --porcelain --untracked-files=no -- "${measured[@]}")" ]]; then
  if [[ $dirty_ok == 0 ]]; then
    git status --short -- "${measured[@]}" >&2
    echo "regenerate_results: uncommitted changes above; commit them first (the CSVs record the commit they measured) or pass --allow-dirty" >&2
    exit 1
  fi
  commit="$commit+dirty"
fi
date=$(date -u +%F)
logs="$ROOT/build/results-logs/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$logs"
echo "regenerate_results: measuring commit $commit; logs in ${logs#$ROOT/}"

ran=() skipped=() failed=()
start_all=$SECONDS
while IFS=$'\x1f' read -r id minutes skip outputs run; do
  selected "$id" || continue
  if [[ -n "$skip" ]]; then
    skipped+=("$id: $skip")
    continue
  fi
  OUT=$(mktemp -d) TMP=$(mktemp -d)
  export OUT TMP
  python3 -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])))' "$run" > "$TMP/run.sh"
  echo "== $id (about $minutes min): $(head -c 300 "$TMP/run.sh" | head -1)"
  t0=$SECONDS
  set +e
  bash -euo pipefail "$TMP/run.sh" < /dev/null 2>&1 | tee "$logs/$id.log"
  rc=${PIPESTATUS[0]}
  set -e
  if [[ $rc == 0 ]]; then
    python3 scripts/results_page.py validate "$id" "$OUT" "${full_flag[@]}" < /dev/null 2>&1 | tee -a "$logs/$id.log"
    rc=${PIPESTATUS[0]}
  fi
  if [[ $rc != 0 ]]; then
    echo "regenerate_results: $id FAILED (exit $rc) after $((SECONDS - t0)) s; its CSV is unchanged; log: ${logs#$ROOT/}/$id.log" >&2
    failed+=("$id")
    rm -rf "$OUT" "$TMP"
    [[ $keep_going == 1 ]] && continue
    break
  fi
  IFS=',' read -r -a paths <<<"$outputs"
  for p in "${paths[@]}"; do  # every output first, so that none is copied if one is missing
    [[ -f "$OUT/$(basename "$p")" ]] || { echo "regenerate_results: $id wrote no $(basename "$p")" >&2; exit 1; }
  done
  for p in "${paths[@]}"; do cp "$OUT/$(basename "$p")" "$p"; done
  python3 scripts/results_page.py stamp "$id" "$commit" "$date" "${full_flag[@]}"
  rm -rf "$OUT" "$TMP"
  ran+=("$id: $((SECONDS - t0)) s (estimated $minutes min)")
done <<<"$parts"

python3 scripts/results_page.py
echo
echo "regenerate_results: $((SECONDS - start_all)) s in all"
for r in "${ran[@]+"${ran[@]}"}"; do echo "  re-measured  $r"; done
for s in "${skipped[@]+"${skipped[@]}"}"; do echo "  skipped      $s"; done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "regenerate_results: FAILED: ${failed[*]}" >&2
  exit 1
fi
