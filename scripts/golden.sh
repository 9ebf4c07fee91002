#!/usr/bin/env bash
# golden.sh: record every shipped scenario's outputs under every policy and
# compare them with the committed manifest (testdata/golden/manifest.sha256),
# so a change meant to preserve behaviour can prove it did.
#
#   scripts/golden.sh check        build ./cmd/inabox, record, compare (default)
#   scripts/golden.sh update [DIR] record and rewrite the manifest (keeping
#                                  the recording in DIR if given)
#   scripts/golden.sh record DIR   record into DIR and keep it (for diffing)
#
# What is recorded, for each scenario in testdata/scenarios/*.yaml and
# docs/results/*.yaml and each policy: `inabox run --policy P --out` (its
# summary on stdout, results.json, CSVs, SVGs) and `inabox compare --json`;
# for the default scenario also `--pcap` under every policy and `inabox decode`
# of each pcap; and `inabox demo` with its pcaps. About 8 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:-check}
manifest=testdata/golden/manifest.sha256
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$work/inabox
go build -o "$bin" ./cmd/inabox
# The six policies (the DynaINA variants of the ablation are left out: they
# share DynaINA's code and the ablation's own tables cover them).
policies="none switchml atp esa freeina dynaina"

record() {
  local out=$1
  mkdir -p "$out"
  for f in testdata/scenarios/*.yaml docs/results/*.yaml; do
    local s
    s=$(basename "$f" .yaml)
    for p in $policies; do
      local d=$out/$s/$p
      mkdir -p "$d/out"
      local pcap=()
      if [ "$s" = default ]; then pcap=(--pcap pcap); fi
      (cd "$d" && "$bin" run --policy "$p" --out out "${pcap[@]}" "$root/$f" >stdout.txt 2>/dev/null) ||
        { echo "golden: run $f --policy $p failed" >&2; exit 1; }
      if [ -d "$d/pcap" ]; then
        for c in "$d"/pcap/*.pcap; do "$bin" decode "$c" >"$c.decode.txt"; done
      fi
    done
    "$bin" compare --json "$f" >"$out/$s/compare.json" 2>/dev/null
  done
  mkdir -p "$out/demo"
  (cd "$out/demo" && "$bin" demo --pcap pcap >stdout.txt 2>/dev/null)
}

case $mode in
record) record "${2:?record needs a directory}"; echo "recorded into $2" ;;
update)
  g=${2:-$work/g}
  record "$g"
  (cd "$g" && find . -type f | LC_ALL=C sort | xargs sha256sum) >"$manifest"
  echo "wrote $manifest ($(wc -l <"$manifest") files)" ;;
check)
  record "$work/g"
  (cd "$work/g" && find . -type f | LC_ALL=C sort | xargs sha256sum) >"$work/now.sha256"
  if diff -u "$manifest" "$work/now.sha256"; then
    echo "golden: $(wc -l <"$manifest") outputs byte-identical"
  else
    echo "golden: outputs differ from $manifest (record both revisions with 'scripts/golden.sh record DIR' and diff)" >&2
    exit 1
  fi ;;
*) echo "usage: scripts/golden.sh [check|update [DIR]|record DIR]" >&2; exit 2 ;;
esac
