#!/usr/bin/env bash
# What a refactoring of branch and bound must not change: `verify --deterministic` on three
# fixture instances (ReLU splitting on an MLP and on a CNN, input splitting on ACAS Xu), each
# printed as one line: verdict, rounds-bounded domains, domains per group and the worst bound to
# 17 significant digits. Run it before and after a change and diff the two outputs:
#   bash scripts/bab_fingerprint.sh [DISTCROWN_BINARY] > before.txt
# Needs ../shared/fixtures (skips with a message where it is absent).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:-${ROOT}/build/bin/distcrown}"
FIX="${DISTCROWN_FIXTURES:-${ROOT}/../shared/fixtures}"
if [[ ! -d "$FIX/models" ]]; then
  echo "bab_fingerprint: no fixtures at $FIX; nothing to compare" >&2
  exit 0
fi
PY="$(cat "${ROOT}/.venv-path" 2>/dev/null || echo "${HOME}/.cache/distcrown/venv-torch-2.11.0")/bin/python"
[[ -x "$PY" ]] || PY=python3
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# name | model | property | extra options
cases=(
  "mnist_256x6_relu|mnist_256x6.onnx|mnist_prop_2_0.05.vnnlib|--split relu --max-rounds 12"
  "oval21_cnn_relu|oval21_base.onnx|oval21_cifar_base_kw-img3161-eps0.018562091503267972.vnnlib|--split relu --max-rounds 6"
  "acasxu_3_3_prop2_input|acasxu_3_3.onnx|acasxu_prop_2.vnnlib|--split input --max-rounds 400"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name model prop extra <<<"$c"
  # shellcheck disable=SC2086
  "$BIN" verify --model "$FIX/models/$model" --vnnlib "$FIX/specs/$prop" --deterministic \
    --timeout 0 --quiet --report "$tmp/$name.json" $extra >/dev/null
  "$PY" - "$name" "$tmp/$name.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[2]))
wb = r.get("worst_bound")
print(f"{sys.argv[1]}: result={r['result']} domains_bounded={r['domains_bounded']} "
      f"domains_per_group={r.get('domains_per_group')} "
      f"worst_bound={'none' if wb is None else format(wb, '.17g')}")
PYEOF
done
