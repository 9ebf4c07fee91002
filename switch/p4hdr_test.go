package sw

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// p4Headers parses the `header NAME { bit<W> field; ... }` declarations of
// a P4 source file.
func p4Headers(t *testing.T, src string) map[string][]inahdr.Field {
	t.Helper()
	hdrRE := regexp.MustCompile(`(?s)header\s+(\w+)\s*\{(.*?)\}`)
	fieldRE := regexp.MustCompile(`^\s*bit<(\d+)>\s+(\w+)\s*;`)
	out := map[string][]inahdr.Field{}
	for _, m := range hdrRE.FindAllStringSubmatch(src, -1) {
		var fs []inahdr.Field
		off := 0
		for _, line := range strings.Split(m[2], "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "//") {
				continue
			}
			f := fieldRE.FindStringSubmatch(line)
			if f == nil {
				t.Fatalf("header %s: cannot parse %q", m[1], line)
			}
			w, _ := strconv.Atoi(f[1])
			fs = append(fs, inahdr.Field{Name: f[2], Bits: w, Off: off / 8})
			off += w
		}
		out[m[1]] = fs
	}
	return out
}

func bitsOf(fs []inahdr.Field) int {
	n := 0
	for _, f := range fs {
		n += f.Bits
	}
	return n
}

// TestP4HeadersMatchGo checks field by field that the P4 twin's header
// declarations agree with the Go layout (inahdr.Fields, the rdma sizes and
// the value block).
func TestP4HeadersMatchGo(t *testing.T) {
	src, err := os.ReadFile(p4Path)
	if err != nil {
		t.Fatal(err)
	}
	h := p4Headers(t, string(src))
	ina := h["ina_h"]
	if len(ina) != len(inahdr.Fields) {
		t.Fatalf("ina_h has %d fields, inahdr.Fields %d", len(ina), len(inahdr.Fields))
	}
	for i, f := range inahdr.Fields {
		if ina[i] != f {
			t.Errorf("field %d: P4 %+v, Go %+v", i, ina[i], f)
		}
	}
	// Check the Go accessors sit at the same offsets: write each field
	// through the Go view with a marker and find it where P4 puts it.
	b := make([]byte, inahdr.Len)
	hv := inahdr.Header(b)
	hv.Encode(inahdr.Meta{Flags: 0x11, Job: 0x2222, AllReduce: 0x3333, Count: 0x4444, Chunk: 0x55555555,
		Worker: 0x66, Exponent: 0x77, Slot: 0x8888, Bitmap: 0x99999999})
	want := map[string]uint64{"version": inahdr.Version, "flags": 0x11, "job": 0x2222, "allreduce": 0x3333, "count": 0x4444,
		"chunk": 0x55555555, "worker": 0x66, "exponent": 0x77, "slot": 0x8888, "bitmap": 0x99999999}
	for _, f := range ina {
		var v uint64
		for k := 0; k < f.Bits/8; k++ {
			v = v<<8 | uint64(b[f.Off+k])
		}
		if v != want[f.Name] {
			t.Errorf("P4 field %s at byte %d reads %#x from the Go encoding, want %#x", f.Name, f.Off, v, want[f.Name])
		}
	}
	sizes := map[string]int{"ethernet_h": 14, "ipv4_h": 20, "udp_h": 8, "bth_h": rdma.BTHLen, "reth_h": rdma.RETHLen,
		"immdt_h": rdma.ImmDtLen, "ina_h": inahdr.Len, "ina_blk_h": 4 * DefaultValuesPerPass}
	for name, n := range sizes {
		if got := bitsOf(h[name]); got != 8*n {
			t.Errorf("%s is %d bits, want %d bytes", name, got, n)
		}
	}
	// BTH dst_qp and the INA offsets the Go parser uses.
	for _, f := range h["bth_h"] {
		if f.Name == "dst_qp" && (f.Off != 5 || f.Bits != 24) {
			t.Errorf("bth dst_qp at %d/%d bits", f.Off, f.Bits)
		}
	}
}
