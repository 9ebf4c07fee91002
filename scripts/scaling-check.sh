#!/usr/bin/env bash
# scaling-check.sh: one ResNet-50 job of 8 workers alone (2 iterations,
# 16384 slots) at two rate scales and two ways of setting the link delay
# (stretched by 1/rate_scale, or the true 2 µs), under SwitchML, ATP,
# FreeINA and the ring, at zero host cost (the network alone: ATP's software
# stack would add the same factor at every scale); prints the time each spent in all-reduces
# (results.json jobs[0].comm_time_s). docs/results.md, "Scaling check".
# TRUE_SCALE=1 adds the true-scale run (rate_scale 1, 100 Gb/s, the whole
# gradient, 2 µs links: a few seconds a policy here). COSTS=sourced runs at
# the sourced host costs instead (topology.costs: ATP's 46 Gb/s stack);
# POLICIES="atp" runs only the given policies.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/inabox" ./cmd/inabox
printf '%-10s %-8s %-9s %s\n' rate_scale delay policy comm_time_s
cfgs=("0.01 200us" "0.1 20us" "0.01 2us" "0.1 2us")
if [ -n "${TRUE_SCALE:-}" ]; then cfgs+=("1 2us"); fi
for cfg in "${cfgs[@]}"; do
  read -r s d <<<"$cfg"
  cat >"$work/s.yaml" <<Y
name: scaling-check
seed: 1
time_limit: 60s
scaling: {tensor_scale: $s, rate_scale: $s}
topology:
  link_gbps: 100
  link_delay: $d
  costs: ${COSTS:-none}
  switch: {slots: 16384, values_per_packet: 64}
jobs:
  - {name: r50, model: resnet50, workers: 8, iterations: 2}
Y
  for p in ${POLICIES:-switchml atp freeina none}; do
    "$work/inabox" run --policy "$p" --out "$work/o" "$work/s.yaml" >/dev/null
    c=$(sed -n 's/^ *"comm_time_s": \([0-9.e+-]*\),*$/\1/p' "$work/o/results.json" | head -1)
    printf '%-10s %-8s %-9s %s\n' "$s" "$d" "$p" "$c"
  done
done
