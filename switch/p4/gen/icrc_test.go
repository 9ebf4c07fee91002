package gen

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// p4Layout is what the test reads from the generated program: each header
// type's fields (name, bits) and the struct headers' instances (name →
// type), in order.
type p4Layout struct {
	types map[string][]p4Field
	order []string // instances, in struct order
	inst  map[string]string
}

type p4Field struct {
	name string
	bits int
}

func parseLayout(t *testing.T, src string) p4Layout {
	t.Helper()
	l := p4Layout{types: map[string][]p4Field{}, inst: map[string]string{}}
	fieldRE := regexp.MustCompile(`bit<(\d+)>\s+(\w+);`)
	for _, m := range regexp.MustCompile(`(?s)header (\w+) \{(.*?)\}`).FindAllStringSubmatch(src, -1) {
		for _, f := range fieldRE.FindAllStringSubmatch(m[2], -1) {
			n, _ := strconv.Atoi(f[1])
			l.types[m[1]] = append(l.types[m[1]], p4Field{f[2], n})
		}
	}
	m := regexp.MustCompile(`(?s)struct headers \{(.*?)\}`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("no struct headers")
	}
	for _, f := range regexp.MustCompile(`(\w+(?:\[\d+\])?)\s+(\w+);`).FindAllStringSubmatch(m[1], -1) {
		l.order = append(l.order, f[2])
		l.inst[f[2]] = f[1]
	}
	return l
}

// bitString is a big-endian bit string.
type bitString struct {
	b []byte
	n int
}

func (s *bitString) push(v uint64, w int) {
	for i := w - 1; i >= 0; i-- {
		if s.n%8 == 0 {
			s.b = append(s.b, 0)
		}
		if v>>uint(i)&1 != 0 {
			s.b[s.n/8] |= 0x80 >> uint(s.n%8)
		}
		s.n++
	}
}

// field64 reads w bits at bit offset off of frame.
func field64(frame []byte, off, w int) uint64 {
	var v uint64
	for i := 0; i < w; i++ {
		v = v<<1 | uint64(frame[(off+i)/8]>>(7-uint((off+i)%8))&1)
	}
	return v
}

// TestICRCFieldLists evaluates each of the twin's ICRC field lists (read
// back from the hash calls in ina.p4's text) over a frame of its shape, as
// BMv2 does (fields concatenated, CRC-32), and checks the result against
// rdma's ICRC of the same frame: every extension-header combination, with
// 0 values (a trimmed frame) and whole passes of values. A count that is
// not whole passes must match no case (the twin leaves its ICRC alone).
func TestICRCFieldLists(t *testing.T) {
	prog, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	src := string(prog)
	lay := parseLayout(t, src)
	d := Default()
	cases := d.ICRCCases()
	for _, c := range cases {
		for _, sep := range []string{",\n                        ", ",\n                    "} {
			if n := strings.Count(src, strings.Join(c.Fields, sep)+" }"); n != 1 {
				t.Errorf("case %q: field list found %d times with indent %d, want once (ingress check, egress rewrite)", c.Cond, n, len(sep)-2)
			}
		}
	}
	stackRE := regexp.MustCompile(`^(\w+)\[(\d+)\]$`)
	elemRE := regexp.MustCompile(`^hdr\.(\w+)\[(\d+)\]\.(\w+)$`)
	constRE := regexp.MustCompile(`^(\d+)w0x([0-9A-Fa-f]+)$`)
	condRE := regexp.MustCompile(`^hdr\.ina\.count == (\d+)$`)
	rng := rand.New(rand.NewPCG(1, 2))
	ops := []rdma.Opcode{rdma.OpSendOnly, rdma.OpRDMAWriteOnly, rdma.OpSendOnlyImm, rdma.OpRDMAWriteOnlyImm}
	checked := 0
	for _, n := range []int{0, 1, 37, 63, 64, 65, 100, 128, 192, 200, d.MaxValues()} {
		for _, op := range ops {
			vals := make([]int32, n)
			for i := range vals {
				vals[i] = int32(rng.Uint32())
			}
			payload := inahdr.Append(nil, inahdr.Meta{Flags: inahdr.FlagResult, Job: 7, AllReduce: 3, Chunk: rng.Uint32(),
				Worker: 2, Bitmap: 0x5, Exponent: -3, Slot: 77}, vals)
			fh := rdma.FrameHeader{Src: rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.AddrFrom4([4]byte{10, 0, 0, 1})},
				Dst:     rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.AddrFrom4([4]byte{10, 0, 0, 2})},
				SrcPort: 0xC123, TOS: 0x02, TTL: 64, ID: 0x1234, Opcode: op, PKey: 0xFFFF, BECN: true, DestQP: 0xABCDEF,
				AckReq: true, PSN: 0x123456, VA: rng.Uint64(), RKey: rng.Uint32(), DMALength: 4096, Imm: rng.Uint32()}
			frame := make([]byte, fh.Len(len(payload)))
			if _, err := fh.Encode(frame, payload); err != nil {
				t.Fatal(err)
			}
			want, err := rdma.ComputeICRC(frame)
			if err != nil {
				t.Fatal(err)
			}
			// The valid headers' bit offsets, the value stack's valid
			// elements (the frame's values) one after another.
			valid := map[string]bool{"ethernet": true, "ipv4": true, "udp": true, "bth": true, "ina": true,
				"reth":  op == rdma.OpRDMAWriteOnly || op == rdma.OpRDMAWriteOnlyImm,
				"immdt": op == rdma.OpSendOnlyImm || op == rdma.OpRDMAWriteOnlyImm}
			offs := map[string]int{}     // valid instance (or stack element) → bit offset
			types := map[string]string{} // instance → header type
			off := 0
			for _, h := range lay.order {
				typ, elems, stack := lay.inst[h], 0, false
				if m := stackRE.FindStringSubmatch(typ); m != nil {
					typ, elems, stack = m[1], n, true
				} else if !valid[h] {
					continue
				}
				types[h] = typ
				size := 0
				for _, f := range lay.types[typ] {
					size += f.bits
				}
				if !stack {
					offs[h] = off
					off += size
					continue
				}
				for e := range elems {
					offs[fmt.Sprintf("%s[%d]", h, e)] = off
					off += size
				}
			}
			if off/8 != len(frame)-rdma.ICRCLen {
				t.Fatalf("%v, %d values: headers cover %d bytes of a %d-byte frame", op, n, off/8, len(frame))
			}
			var match []ICRCCase
			for _, c := range cases {
				holds := true
				for _, term := range strings.Split(c.Cond, "&&") {
					term = strings.TrimSpace(term)
					if m := condRE.FindStringSubmatch(term); m != nil {
						k, _ := strconv.Atoi(m[1])
						holds = holds && k == n
						continue
					}
					neg := strings.HasPrefix(term, "!")
					h, ok := strings.CutPrefix(strings.TrimPrefix(term, "!"), "hdr.")
					if !ok || !strings.HasSuffix(h, ".isValid()") {
						t.Fatalf("condition term %q", term)
					}
					holds = holds && valid[strings.TrimSuffix(h, ".isValid()")] != neg
				}
				if holds {
					match = append(match, c)
				}
			}
			whole := n%len(d.Lanes) == 0
			if len(match) != 1 || !whole {
				if whole || len(match) != 0 {
					t.Fatalf("%v, %d values: %d cases match", op, n, len(match))
				}
				continue
			}
			var s bitString
			for _, f := range match[0].Fields {
				if m := constRE.FindStringSubmatch(f); m != nil {
					w, _ := strconv.Atoi(m[1])
					v, _ := strconv.ParseUint(m[2], 16, 64)
					s.push(v, w)
					continue
				}
				var inst, base, field string
				if m := elemRE.FindStringSubmatch(f); m != nil {
					inst, base, field = m[1]+"["+m[2]+"]", m[1], m[3]
				} else if parts := strings.Split(f, "."); len(parts) == 3 && parts[0] == "hdr" {
					inst, base, field = parts[1], parts[1], parts[2]
				} else {
					t.Fatalf("field %q: not a header field", f)
				}
				at, ok := offs[inst]
				if !ok {
					t.Fatalf("%v, %d values: field %q of an invalid header", op, n, f)
				}
				found := false
				for _, pf := range lay.types[types[base]] {
					if pf.name == field {
						s.push(field64(frame, at, pf.bits), pf.bits)
						found = true
						break
					}
					at += pf.bits
				}
				if !found {
					t.Fatalf("field %q: no such field", f)
				}
			}
			if s.n%8 != 0 {
				t.Fatalf("%v, %d values: field list of %d bits", op, n, s.n)
			}
			if got := crc32.ChecksumIEEE(s.b); got != want {
				t.Errorf("%v, %d values: field list CRC %#08x, ICRC %#08x", op, n, got, want)
			}
			checked++
		}
	}
	if checked != len(cases) {
		t.Fatalf("checked %d shapes of %d cases", checked, len(cases))
	}
}
