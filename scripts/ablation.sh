#!/usr/bin/env bash
# ablation.sh: DynaINA's ablation against the other designs, per regime
# (docs/results/ablation/*.yaml): `inabox compare --seeds N` over FreeINA,
# ATP, ESA, SwitchML and the four DynaINA variants, writing each regime's
# table (compare.txt), compare.json and jct.svg into
# docs/results/ablation/<regime>/. docs/results.md, "DynaINA ablation",
# quotes them.
#
#   scripts/ablation.sh [REGIME...]   default: every regime; SEEDS=3
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-3}
policies=freeina,atp,esa,switchml,dynaina-pools,dynaina-sched,dynaina,dynaina-lend
bin=$(mktemp -d)/inabox
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/inabox
regimes=("$@")
if [ ${#regimes[@]} -eq 0 ]; then
  for f in docs/results/ablation/*.yaml; do regimes+=("$(basename "$f" .yaml)"); done
fi
for r in "${regimes[@]}"; do
  out=docs/results/ablation/$r
  mkdir -p "$out"
  "$bin" compare --seeds "$seeds" --policies "$policies" --out "$out" "docs/results/ablation/$r.yaml" >"$out/compare.txt" 2>/dev/null ||
    echo "ablation: $r: some runs failed (see $out/compare.txt)" >&2
  echo "$r: $(grep -m1 'JCT mean' "$out/compare.txt")"
done
