#!/usr/bin/env bash
# difftest.sh — run the STF vectors in testdata/stf on BMv2 with the P4 twin
# (switch/p4/ina.p4), the same vectors `go test ./switch` runs on the Go
# switch. Called by `make p4-difftest`; run from anywhere.
#
# Needs (none is packaged in Debian 12; see /work/shared/research/p4-bmv2.md §1):
#   p4c-bm2-ss          p4c's BMv2 backend (p4c >= 1.2.3 for @field_list /
#                       recirculate_preserving_field_list)
#   simple_switch       BMv2 (behavioral-model), with simple_switch_CLI on PATH
#   run-bmv2-test.py    from a p4c source tree: set P4C_SRC=/path/to/p4c
#                       (it imports backends/bmv2/bmv2stf.py and tools/stf)
#   P4C_BUILD           p4c build directory holding ./p4c-bm2-ss and config.h
#                       (default $P4C_SRC/build); the runner is started there
#   P4C_RUN_ARGS        extra options for run-bmv2-test.py (e.g. -v -b)
#   python3 modules     ply, thrift, ptf (ptf only for its pcap reader/writer)
#
# Exit status: 0 all vectors pass; 1 a vector failed; 2 a tool is missing.
# Missing tools are an error when invoked explicitly, because a silent skip
# would look like a pass. Set P4_DIFFTEST_ALLOW_SKIP=1 to turn that case
# into "SKIP" with exit 0 (for CI images without BMv2).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prog="$here/ina.p4"
vectors=("$root"/testdata/stf/*.stf)

missing=()
command -v p4c-bm2-ss >/dev/null 2>&1 || missing+=("p4c-bm2-ss (build p4c with -DENABLE_BMV2=ON)")
command -v simple_switch >/dev/null 2>&1 || missing+=("simple_switch (build p4lang/behavioral-model)")
command -v simple_switch_CLI >/dev/null 2>&1 || missing+=("simple_switch_CLI (installed with behavioral-model)")
runner="${P4C_SRC:-}/backends/bmv2/run-bmv2-test.py"
if [ -z "${P4C_SRC:-}" ] || [ ! -f "$runner" ]; then
    missing+=("P4C_SRC=<p4c source tree> containing backends/bmv2/run-bmv2-test.py")
fi
build="${P4C_BUILD:-${P4C_SRC:-/nonexistent}/build}"
if [ ! -x "$build/p4c-bm2-ss" ] || [ ! -f "$build/config.h" ]; then
    missing+=("P4C_BUILD=<p4c build dir> with p4c-bm2-ss and config.h (HAVE_SIMPLE_SWITCH defined)")
elif ! grep -q '^#define HAVE_SIMPLE_SWITCH' "$build/config.h"; then
    # Without it every runner version skips BMv2 and reports success: a
    # silent pass. p4c's cmake defines it when it finds simple_switch.
    missing+=("HAVE_SIMPLE_SWITCH in $build/config.h (reconfigure p4c with simple_switch on PATH; without it the runner skips BMv2 and reports a pass)")
fi
for mod in ply thrift ptf; do
    python3 -c "import $mod" >/dev/null 2>&1 || missing+=("python3 module '$mod' (pip install $mod; Debian: python3-ply, python3-thrift; ptf is not packaged)")
done

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

echo "p4-difftest: compiling $prog"
if ! p4c-bm2-ss --std p4-16 --arch v1model -o "$work/ina.json" "$prog"; then
    echo "p4-difftest: FAIL: p4c-bm2-ss rejected $prog" >&2
    exit 1
fi

pass=0
fail=0
failed=()
for v in "${vectors[@]}"; do
    name=$(basename "$v" .stf)
    # run-bmv2-test.py compiles again and drives simple_switch through
    # simple_switch_CLI and pcap FIFOs; it compares expect lines (nibble
    # wildcards, '$' exact length). register_read lines are sent but their
    # values are not checked by BMv2's runner (the Go runner checks them).
    # Every runner version finds the STF next to the .p4 with the same base
    # name, so each vector gets its own copy of the program.
    cp "$prog" "$work/$name.p4"
    cp "$v" "$work/$name.stf"
    # shellcheck disable=SC2086
    if (cd "$build" && python3 "$runner" "$P4C_SRC" ${P4C_RUN_ARGS:-} "$work/$name.p4" >"$work/$name.log" 2>&1); then
        pass=$((pass + 1))
        echo "PASS $name"
    else
        fail=$((fail + 1))
        failed+=("$name")
        echo "FAIL $name (log: tail of $work/$name.log below)"
        tail -20 "$work/$name.log" | sed 's/^/    /'
    fi
done
echo "p4-difftest: $pass passed, $fail failed of ${#vectors[@]} vectors"
if [ $fail -gt 0 ]; then
    printf '  failed: %s\n' "${failed[@]}"
    exit 1
fi
exit 0
