package gen

import (
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
	for _, f := range regexp.MustCompile(`(\w+)\s+(\w+);`).FindAllStringSubmatch(m[1], -1) {
		l.order = append(l.order, f[2])
		l.inst[f[2]] = f[1]
	}
	return l
}

// bits is a big-endian bit string.
type bits struct {
	b []byte
	n int
}

func (s *bits) push(v uint64, w int) {
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

// field reads w bits at bit offset off of frame.
func field(frame []byte, off, w int) uint64 {
	var v uint64
	for i := 0; i < w; i++ {
		v = v<<1 | uint64(frame[(off+i)/8]>>(7-uint((off+i)%8))&1)
	}
	return v
}

// TestICRCFieldLists evaluates every field list of the twin's ICRC (the
// generated hash calls, read back from ina.p4's text) over a frame of its
// shape, as BMv2 does (fields concatenated, CRC-32), and checks the result
// against rdma's ICRC of the same frame: every extension-header
// combination, trimmed and with 1 to 4 value blocks.
func TestICRCFieldLists(t *testing.T) {
	prog, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	src := string(prog)
	lay := parseLayout(t, src)
	cases := Default().ICRCCases()
	for _, c := range cases {
		if !strings.Contains(src, strings.Join(c.Fields, ",\n                    ")) &&
			!strings.Contains(src, strings.Join(c.Fields, ",\n                        ")) {
			t.Fatalf("case %q: field list not in the program", c.Cond)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ops := []rdma.Opcode{rdma.OpSendOnly, rdma.OpRDMAWriteOnly, rdma.OpSendOnlyImm, rdma.OpRDMAWriteOnlyImm}
	checked := 0
	for nb := 0; nb <= len(Default().Blocks); nb++ {
		for _, op := range ops {
			vals := make([]int32, 64*nb)
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
			// Header instances valid in this frame, and their bit offsets.
			valid := map[string]bool{"ethernet": true, "ipv4": true, "udp": true, "bth": true, "ina": true,
				"reth":  op == rdma.OpRDMAWriteOnly || op == rdma.OpRDMAWriteOnlyImm,
				"immdt": op == rdma.OpSendOnlyImm || op == rdma.OpRDMAWriteOnlyImm}
			for b := 0; b < nb; b++ {
				valid["blk"+strconv.Itoa(b)] = true
			}
			offs := map[string]int{}
			off := 0
			for _, h := range lay.order {
				if !valid[h] {
					continue
				}
				offs[h] = off
				for _, f := range lay.types[lay.inst[h]] {
					off += f.bits
				}
			}
			if off/8 != len(frame)-rdma.ICRCLen {
				t.Fatalf("%v, %d blocks: headers cover %d bytes of a %d-byte frame", op, nb, off/8, len(frame))
			}
			var match []ICRCCase
			for _, c := range cases {
				if condHolds(t, c.Cond, valid) {
					match = append(match, c)
				}
			}
			if len(match) != 1 {
				t.Fatalf("%v, %d blocks: %d cases match, want 1", op, nb, len(match))
			}
			var s bits
			constRE := regexp.MustCompile(`^(\d+)w0x([0-9A-Fa-f]+)$`)
			for _, f := range match[0].Fields {
				if m := constRE.FindStringSubmatch(f); m != nil {
					w, _ := strconv.Atoi(m[1])
					v, _ := strconv.ParseUint(m[2], 16, 64)
					s.push(v, w)
					continue
				}
				parts := strings.Split(f, ".") // hdr.<instance>.<field>
				if len(parts) != 3 || parts[0] != "hdr" || !valid[parts[1]] {
					t.Fatalf("field %q: not a valid header's field", f)
				}
				at, found := offs[parts[1]], false
				for _, pf := range lay.types[lay.inst[parts[1]]] {
					if pf.name == parts[2] {
						s.push(field(frame, at, pf.bits), pf.bits)
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
				t.Fatalf("%v, %d blocks: field list of %d bits", op, nb, s.n)
			}
			if got := crc32.ChecksumIEEE(s.b); got != want {
				t.Errorf("%v, %d blocks: field list CRC %#08x, ICRC %#08x", op, nb, got, want)
			}
			checked++
		}
	}
	if checked != len(cases) {
		t.Fatalf("checked %d shapes of %d cases", checked, len(cases))
	}
}

// condHolds evaluates a case's condition: hdr.X.isValid() terms, some
// negated, joined by &&.
func condHolds(t *testing.T, cond string, valid map[string]bool) bool {
	t.Helper()
	for _, term := range strings.Split(cond, "&&") {
		term = strings.TrimSpace(term)
		neg := strings.HasPrefix(term, "!")
		term = strings.TrimPrefix(term, "!")
		h, ok := strings.CutPrefix(term, "hdr.")
		if !ok || !strings.HasSuffix(h, ".isValid()") {
			t.Fatalf("condition term %q", term)
		}
		if valid[strings.TrimSuffix(h, ".isValid()")] == neg {
			return false
		}
	}
	return true
}
