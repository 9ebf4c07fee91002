#!/usr/bin/env bash
# difftest.sh — run the STF vectors in testdata/stf on BMv2 with the P4 twin
# (switch/p4/ina.p4), the same vectors `go test ./switch -run TestSTF` runs
# on the Go switch. Called by `make p4-difftest`; run from anywhere.
#
# The program is compiled once; each vector then runs on a fresh
# simple_switch, driven by the Go runner switch/p4/cmd/p4difftest (package
# switch/p4/bmv2), which prints PASS or FAIL per vector. p4c's own Python
# STF runner and its source tree are not used.
#
# Needs, on PATH or named by the variable beside it (none is packaged in
# Debian 12; switch/p4/README.md says how they are built):
#   p4c-bm2-ss         P4C_BM2_SS         p4c's BMv2 backend (p4c >= 1.2.3 for
#                                         @field_list / recirculate_preserving_field_list)
#   simple_switch      SIMPLE_SWITCH      BMv2 (p4lang/behavioral-model)
#   simple_switch_CLI  SIMPLE_SWITCH_CLI  installed with BMv2 (Python; needs the
#                                         thrift module: Debian python3-thrift)
#   go                                    to build the runner
# P4_DIFFTEST_ARGS passes options to the runner (e.g. -keep; -help lists them).
#
# Exit status: 0 all vectors pass; 1 a vector failed or p4c rejected the
# program; 2 a tool is missing or a vector could not run. Missing tools are
# an error when invoked explicitly, because a silent skip would look like a
# pass. Set P4_DIFFTEST_ALLOW_SKIP=1 to turn that case into "SKIP" with
# exit 0 (for CI images without BMv2).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prog="$here/ina.p4"
vectors=("$root"/testdata/stf/*.stf)

p4c=${P4C_BM2_SS:-p4c-bm2-ss}
sw=${SIMPLE_SWITCH:-simple_switch}
cli=${SIMPLE_SWITCH_CLI:-simple_switch_CLI}
missing=()
command -v "$p4c" >/dev/null 2>&1 || missing+=("p4c-bm2-ss (build p4c with -DENABLE_BMV2=ON; or set P4C_BM2_SS)")
command -v "$sw" >/dev/null 2>&1 || missing+=("simple_switch (build p4lang/behavioral-model; or set SIMPLE_SWITCH)")
command -v "$cli" >/dev/null 2>&1 || missing+=("simple_switch_CLI (installed with behavioral-model; or set SIMPLE_SWITCH_CLI)")
command -v go >/dev/null 2>&1 || missing+=("go")
if [ ${#missing[@]} -eq 0 ] && ! "$cli" --help >/dev/null 2>&1; then
    missing+=("a working $cli ('$cli --help' fails: its Python modules, e.g. thrift (Debian: python3-thrift), or BMv2's bm_runtime are not importable)")
fi

if [ ${#missing[@]} -gt 0 ]; then
    {
        echo "p4-difftest: cannot run the BMv2 diff test; missing:"
        for m in "${missing[@]}"; do echo "  - $m"; done
        echo "The Go side of the same ${#vectors[@]} vectors runs in: go test ./switch -run TestSTF"
    } >&2
    if [ "${P4_DIFFTEST_ALLOW_SKIP:-0}" = 1 ]; then
        echo "p4-difftest: SKIP (P4_DIFFTEST_ALLOW_SKIP=1)"
        exit 0
    fi
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "p4-difftest: compiling $prog with $(command -v "$p4c")"
if ! "$p4c" --std p4-16 --arch v1model -o "$work/ina.json" "$prog"; then
    echo "p4-difftest: FAIL: p4c-bm2-ss rejected $prog" >&2
    exit 1
fi
(cd "$root" && go build -o "$work/p4difftest" ./switch/p4/cmd/p4difftest) || exit 2
echo "p4-difftest: running ${#vectors[@]} vectors on $(command -v "$sw")"
# shellcheck disable=SC2086
"$work/p4difftest" -json "$work/ina.json" -switch "$(command -v "$sw")" -cli "$(command -v "$cli")" \
    ${P4_DIFFTEST_ARGS:-} "${vectors[@]}"
