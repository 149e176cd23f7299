# Sourced by scripts/test.sh: runs named steps, times each, and prints a table of them when the
# script exits (also when a step fails, so a failed CI run still says where its minutes went).
#   step "name" command args...   runs the command; a failure ends the script with its exit code
#   DISTCROWN_STEPS_TSV=FILE      also appends "name<TAB>seconds<TAB>status" lines to FILE
_distcrown_step_names=()
_distcrown_step_secs=()
_distcrown_step_status=()
_distcrown_steps_start=${SECONDS}

step() {
  local name="$1"
  shift
  echo "==> ${name}" >&2
  local start=${SECONDS} rc=0
  "$@" || rc=$?
  local secs=$((SECONDS - start)) status="ok"
  ((rc == 0)) || status="FAILED (exit ${rc})"
  _distcrown_step_names+=("$name")
  _distcrown_step_secs+=("$secs")
  _distcrown_step_status+=("$status")
  if [[ -n "${DISTCROWN_STEPS_TSV:-}" ]]; then
    printf '%s\t%s\t%s\n' "$name" "$secs" "$status" >>"$DISTCROWN_STEPS_TSV"
  fi
  ((rc == 0)) || exit "$rc"
}

_distcrown_print_steps() {
  local rc=$?
  ((${#_distcrown_step_names[@]})) || return "$rc"
  {
    echo
    printf '%-66s %8s  %s\n' "step" "seconds" "status"
    printf '%-66s %8s  %s\n' "----" "-------" "------"
    local i
    for i in "${!_distcrown_step_names[@]}"; do
      printf '%-66s %8s  %s\n' "${_distcrown_step_names[$i]}" "${_distcrown_step_secs[$i]}" \
        "${_distcrown_step_status[$i]}"
    done
    printf '%-66s %8s\n' "total" "$((SECONDS - _distcrown_steps_start))"
  } >&2
  return "$rc"
}
trap _distcrown_print_steps EXIT
