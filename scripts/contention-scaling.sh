#!/usr/bin/env bash
# contention-scaling.sh: does a contended switch give the same result scaled
# as at true scale? Three ResNet-50 jobs of 2 workers (2 iterations each)
# share memory for 1.14 of their windows, at zero host cost and true 1 µs
# link delays, at rate_scale (= tensor_scale) 0.01, 0.1 and 1 (true scale:
# 100 Gb/s, the whole gradient), the memory and DynaINA's minimum pool
# scaled with the window (7, 19 and 145 aggregators: 8, 22 and 165 slots;
# 2, 5 and 41), with the jobs arriving together (locked) or 7 and 13 ms
# apart (staggered). Prints each job's time in all-reduces and its JCT
# (results.json jobs[].comm_time_s, jct_s) per policy. docs/results.md,
# "Scaling check". About 8 minutes and 2 GB of memory on this machine.
# OUT=DIR keeps each run's scenario and results in DIR/ARRIVALS-SCALE-POLICY/
# (results.json jobs[].iteration_log has every all-reduce's span).
# COSTS=sourced runs at the sourced host costs instead (topology.costs);
# SCALES="1" runs only the given scales, POLICIES="atp esa" only the given
# policies.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/inabox" ./cmd/inabox
printf '%-10s %-5s %-6s %-9s %s\n' arrivals scale slots policy 'comm_time_s (jobs a b c) | jct_s (a b c)'
for arr in "locked 0ms 0ms" "staggered 7ms 13ms"; do
  read -r name b c <<<"$arr"
  for cfg in "0.01 8 2" "0.1 22 5" "1 165 41"; do
    read -r s slots mins <<<"$cfg"
    case " ${SCALES:-0.01 0.1 1} " in *" $s "*) ;; *) continue ;; esac
    cat >"$work/s.yaml" <<Y
name: contention-scaling
seed: 1
time_limit: 60s
scaling: {tensor_scale: $s, rate_scale: $s}
dynaina: {min_slots: $mins}
topology: {link_gbps: 100, link_delay: 1us, costs: ${COSTS:-none}, switch: {slots: $slots}}
jobs:
  - {name: a, model: resnet50, workers: 2, iterations: 2, arrival: 0ms}
  - {name: b, model: resnet50, workers: 2, iterations: 2, arrival: $b}
  - {name: c, model: resnet50, workers: 2, iterations: 2, arrival: $c}
Y
    for p in ${POLICIES:-switchml atp esa freeina dynaina none}; do
      o="$work/o"
      if [ -n "${OUT:-}" ]; then
        o="$OUT/$name-$s-$p"
        mkdir -p "$o"
        cp "$work/s.yaml" "$o/scenario.yaml"
      fi
      "$work/inabox" run --policy "$p" --out "$o" "$work/s.yaml" >/dev/null
      t=$(sed -n 's/^ *"comm_time_s": \([0-9.e+-]*\),*$/\1/p' "$o/results.json" | tr '\n' ' ')
      j=$(sed -n 's/^ *"jct_s": \([0-9.e+-]*\),*$/\1/p' "$o/results.json" | tr '\n' ' ')
      printf '%-10s %-5s %-6s %-9s %s| %s\n' "$name" "$s" "$slots" "$p" "$t" "$j"
    done
  done
done
