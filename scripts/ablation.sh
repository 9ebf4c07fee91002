#!/usr/bin/env bash
# ablation.sh: DynaINA's ablation against the other designs, per regime
# (docs/results/ablation/*.yaml): `inabox compare --seeds N` over FreeINA,
# ATP, ESA, SwitchML and the four DynaINA variants, writing each regime's
# table (compare.txt), compare.json and jct.svg into
# docs/results/ablation/<regime>/. docs/results.md, "Training as it runs:
# buckets, stragglers, clusters, and DynaINA's ablation", quotes them
# (scripts/ablation-table.py prints its table).
#
#   scripts/ablation.sh [REGIME...]   default: every regime; SEEDS=3
#
# DIR=docs/results/ablation-0.1 runs the same regimes rescaled to rate_scale
# 0.1 (that directory's REGIME.yaml, `inabox rescale --rate-scale 0.1` of
# each) and writes there; PARALLEL=N passes --parallel N to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-3}
dir=${DIR:-docs/results/ablation}
parallel=${PARALLEL:-0}
policies=freeina,atp,esa,switchml,dynaina-pools,dynaina-sched,dynaina,dynaina-lend
bin=$(mktemp -d)/inabox
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/inabox
regimes=("$@")
if [ ${#regimes[@]} -eq 0 ]; then
  for f in "$dir"/*.yaml; do regimes+=("$(basename "$f" .yaml)"); done
fi
for r in "${regimes[@]}"; do
  out=$dir/$r
  mkdir -p "$out"
  "$bin" compare --seeds "$seeds" --parallel "$parallel" --policies "$policies" --out "$out" "$dir/$r.yaml" >"$out/compare.txt" 2>/dev/null ||
    echo "ablation: $r: some runs failed (see $out/compare.txt)" >&2
  echo "$r: $(grep -m1 'JCT mean' "$out/compare.txt")"
done
