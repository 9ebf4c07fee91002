#!/usr/bin/env bash
# sweep-stack.sh: FreeINA against ATP and SwitchML as the software stack of
# the baselines' hosts slows (topology.software_stack.gbps; FreeINA's RDMA
# hosts pay none), for one scenario. One row per rate: each policy's JCT mean
# (results.json summary.jct_mean_s) and FreeINA's gain over ATP.
#
#   scripts/sweep-stack.sh testdata/scenarios/freeina-single.yaml 100 80 60 46 30
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:?usage: sweep-stack.sh SCENARIO.yaml GBPS...}
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/inabox" ./cmd/inabox
jct() { sed -n 's/^ *"jct_mean_s": \([0-9.e+-]*\),*$/\1/p' "$1" | tail -1; }
printf '%-10s %12s %13s %12s %12s\n' "stack Gb/s" "atp JCT s" "switchml JCT s" "freeina JCT s" "freeina/atp"
for g in "$@"; do
  # the scenario with topology.software_stack.gbps = g
  awk -v g="$g" '{print} /^topology:/{print "  software_stack: {gbps: " g "}"}' "$file" >"$work/s.yaml"
  for p in atp switchml freeina; do
    "$work/inabox" run --policy "$p" --out "$work/$p" "$work/s.yaml" >/dev/null
  done
  a=$(jct "$work/atp/results.json") s=$(jct "$work/switchml/results.json") f=$(jct "$work/freeina/results.json")
  awk -v g="$g" -v a="$a" -v s="$s" -v f="$f" 'BEGIN{printf "%-10s %12.3f %13.3f %12.3f %11.3f×\n", g, a, s, f, a/f}'
done
