#!/usr/bin/env bash
# pgo.sh: make cmd/inabox/default.pgo, the CPU profile the go command builds
# inabox with (profile-guided optimization: `go build`, `go run` and
# `go install` of ./cmd/inabox pick it up; docs/emulator.md, "Built with
# its profile"). The workloads are what users run most: one true-scale
# ResNet-50 all-reduce of 8 workers at 100 Gb/s under every policy, and
# `inabox compare` of the multi-job, contention and fault scenarios. The
# binary that profiles them is built without a profile (-pgo=off), so the
# result does not depend on the profile it replaces. About a minute on 2
# cores.
#
#   scripts/pgo.sh          rewrite cmd/inabox/default.pgo
#   scripts/pgo.sh FILE     write the merged profile to FILE instead
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-cmd/inabox/default.pgo}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -pgo=off -o "$work/inabox" ./cmd/inabox
cat >"$work/truescale.yaml" <<Y
name: truescale
seed: 1
time_limit: 60s
topology:
  link_gbps: 100
  link_delay: 2us
  switch: {slots: 16384, values_per_packet: 64}
jobs:
  - {name: r50, model: resnet50, workers: 8, iterations: 1}
Y
for p in freeina dynaina atp esa switchml none; do
  echo "pgo: truescale/$p" >&2
  "$work/inabox" run --policy "$p" --cpuprofile "$work/truescale-$p.prof" "$work/truescale.yaml" >/dev/null 2>"$work/log" || { cat "$work/log" >&2; exit 1; }
done
for s in freeina-multi dynaina-contention faults; do
  echo "pgo: compare $s" >&2
  "$work/inabox" compare --parallel 1 --cpuprofile "$work/$s.prof" "testdata/scenarios/$s.yaml" >/dev/null 2>"$work/log" || { cat "$work/log" >&2; exit 1; }
done
go tool pprof -proto "$work"/*.prof >"$work/merged.pgo" 2>/dev/null
mv "$work/merged.pgo" "$out"
echo "pgo: wrote $out ($(wc -c <"$out") bytes)" >&2
