#!/usr/bin/env bash
# run.sh: inabox's virtual-time emulator against ns-3 on the same star (N
# senders → router → sink, 100 Gb/s, 1 µs links, 308-byte frames, nothing
# dropped): bench/ns3/star.cc against bench/ns3/gostar. Builds both, runs
# each case ROUNDS times with the two alternating (ns-3 first in odd rounds),
# and prints, per case, min / median / max of each side's packet-hops per
# wall-second, of the paired ratio inabox ÷ ns-3, and of peak RSS.
#
#   bench/ns3/run.sh [ROUNDS]        (make vs-ns3; ROUNDS default 3)
#   SCALE=0.1 bench/ns3/run.sh 1     (10 % of the packets: a quick look)
#
# Needs Debian's ns3 and libns3-dev (apt-get install ns3 libns3-dev), g++
# and GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
scale=${SCALE:-1}
missing=()
[ -f /usr/include/ns3/core-module.h ] || missing+=("ns-3 headers (/usr/include/ns3/core-module.h: apt-get install libns3-dev)")
ls /usr/lib/*/libns3-core.so >/dev/null 2>&1 || ls /usr/lib/libns3-core.so >/dev/null 2>&1 || missing+=("ns-3 libraries (libns3-core.so: apt-get install libns3-dev ns3)")
command -v g++ >/dev/null || missing+=("g++ (apt-get install g++)")
[ -x /usr/bin/time ] || missing+=("GNU time (apt-get install time)")
if [ ${#missing[@]} -gt 0 ]; then
  printf 'vs-ns3: cannot run, missing:\n' >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Debian's ns-3 is built with logging compiled in; -DNS3_LOG_ENABLE matches
# its class layout (ns-3's UdpClient has a member under it).
g++ -O2 -std=c++17 -DNS3_LOG_ENABLE -I/usr/include -o "$work/star" bench/ns3/star.cc \
  -lns3-applications -lns3-internet -lns3-traffic-control -lns3-bridge -lns3-point-to-point \
  -lns3-network -lns3-stats -lns3-core
go build -o "$work/gostar" ./bench/ns3/gostar

# one SIM ARGS...: runs once, appends "case sim hops_per_s rss_kb" to $work/runs.
one() {
  local c=$1 sim=$2
  shift 2
  local out
  out=$(/usr/bin/time -f 'rss_kb=%M' "$@" 2>&1) || { echo "$out" >&2; exit 1; }
  local hops wall rss
  hops=$(sed -n 's/.* hops=\([0-9]*\).*/\1/p' <<<"$out")
  wall=$(sed -n 's/.* wall_s=\([0-9.]*\).*/\1/p' <<<"$out")
  rss=$(sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p' <<<"$out")
  echo "$c $sim $(awk -v h="$hops" -v w="$wall" 'BEGIN{printf "%.0f", h/w}') $rss" >>"$work/runs"
  printf '  %-14s %-6s %9.0f k hops/s  %7d MB\n' "$c" "$sim" "$(awk -v h="$hops" -v w="$wall" 'BEGIN{print h/w/1000}')" $((rss / 1024)) >&2
}

cases=("n8-line 8 100000 0" "n32-line 32 25000 0" "n8-paced 8 100000 1" "n32-paced 32 25000 1")
for r in $(seq 1 "$rounds"); do
  echo "round $r of $rounds" >&2
  for cs in "${cases[@]}"; do
    read -r c n p paced <<<"$cs"
    p=$(awk -v p="$p" -v s="$scale" 'BEGIN{printf "%d", p*s < 1 ? 1 : p*s}')
    gopaced=""
    [ "$paced" = 1 ] && gopaced="-paced"
    if [ $((r % 2)) = 1 ]; then
      one "$c" ns3 "$work/star" --n="$n" --p="$p" --paced="$paced"
      one "$c" inabox "$work/gostar" -n "$n" -p "$p" $gopaced
    else
      one "$c" inabox "$work/gostar" -n "$n" -p "$p" $gopaced
      one "$c" ns3 "$work/star" --n="$n" --p="$p" --paced="$paced"
    fi
  done
done

# Per case: min/median/max of each side, of the per-round ratio, of RSS.
echo
printf '%-10s %-26s %-26s %-20s %-18s %-18s\n' case "ns-3 k hops/s (min/med/max)" "inabox k hops/s" "ratio inabox/ns-3" "ns-3 RSS MB" "inabox RSS MB"
for cs in "${cases[@]}"; do
  read -r c _ <<<"$cs"
  awk -v c="$c" '
    function stats(a, n,   i, j, t) {  # sort a[1..n]; "min/median/max"
      for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
      return sprintf("%s/%s/%s", fmt(a[1]), fmt(n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2), fmt(a[n]))
    }
    function fmt(v) { return v < 100 ? sprintf("%.2f", v) : sprintf("%.0f", v) }
    $1 == c && $2 == "ns3"    { nn++; ns[nn] = $3 / 1000; nr[nn] = $4 / 1024 }
    $1 == c && $2 == "inabox" { ni++; ib[ni] = $3 / 1000; ir[ni] = $4 / 1024 }
    END {
      for (i = 1; i <= nn && i <= ni; i++) ra[i] = ib[i] * 1000 / (ns[i] * 1000)
      printf "%-10s %-26s %-26s %-20s %-18s %-18s\n", c, stats(ns, nn), stats(ib, ni), stats(ra, nn < ni ? nn : ni), stats(nr, nn), stats(ir, ni)
    }' "$work/runs"
done
