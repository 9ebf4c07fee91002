package rdma

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inabox/inabox/internal/testenv"
)

func TestDecodePcap(t *testing.T) {
	frames := sampleFrames(t)
	bad := append([]byte(nil), frames[2]...)
	bad[len(bad)-5] ^= 0xFF // payload byte: ICRC no longer matches
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	cnp := unhex(t, `e41d2dab2bc2 7cfe90643b32 0800 45c2 003c 718c 4000 4011 9161 0a001101 0a001201
		0000 12b7 0028 0000 8100ffff 40000118 00000000 00000000000000000000000000000000 82fd002a`)
	all := append(append(append([][]byte(nil), frames...), bad, cnp), arp)
	path := filepath.Join(t.TempDir(), "x.pcap")
	testenv.WritePcap(t, path, all)
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	sum, err := DecodePcap(r, &out, func(p []byte) string { return fmt.Sprintf("first=%02x", p[0]) })
	if err != nil {
		t.Fatal(err)
	}
	if sum.Frames != len(all) || sum.RoCE != len(frames)+2 || sum.NonRoCE != 1 || sum.BadICRC != 1 || sum.Malformed != 0 {
		t.Fatalf("summary %+v\n%s", sum, out.String())
	}
	if sum.ByOpcode[OpAck] != 2 || sum.ByOpcode[OpRDMAWriteOnlyImm] != 3 {
		t.Fatalf("by opcode %v", sum.ByOpcode)
	}
	text := out.String()
	for _, want := range []string{"RRoCE SEND First QP=0x000022 PSN=0 ", "ICRC ok", "ICRC BAD", "non-RoCEv2 frame",
		"AETH(NAK(PSN sequence error) msn=", "RETH(va=0x40 rkey=0xb len=600)", "Imm=0x01020304", "{first=", "frames:", "RRoCE CNP QP=0x000118 PSN=0 BECN"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if _, err := DecodePcap(strings.NewReader("not a pcap"), &out, nil); err == nil {
		t.Error("garbage accepted as a capture")
	}
}

// TestDecodePcapFilterAndLinkType: a Filter leaves frames out of the
// output and the counts (Skipped), frame numbers stay the capture's; a
// capture of another link type than Ethernet is refused, naming it.
func TestDecodePcapFilterAndLinkType(t *testing.T) {
	frames := sampleFrames(t)
	path := filepath.Join(t.TempDir(), "x.pcap")
	testenv.WritePcap(t, path, frames)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := DecodePcapWith(bytes.NewReader(data), &out, DecodeOptions{Filter: func(p []byte) bool { return len(p) == 5 }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Frames != len(frames) || sum.Shown != sum.RoCE || sum.Shown+sum.Skipped != sum.Frames || sum.Shown == 0 {
		t.Fatalf("summary %+v", sum)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, l := range lines[:sum.Shown] {
		if !strings.Contains(l, " len=5 ") || strings.HasPrefix(l, "1 ") {
			t.Errorf("shown: %q", l)
		}
	}
	if want := fmt.Sprintf("%d of %d frames shown:", sum.Shown, sum.Frames); !strings.HasPrefix(lines[sum.Shown], want) {
		t.Errorf("counts line %q, want %q", lines[sum.Shown], want)
	}
	// The link type is at bytes 20..23 of a pcap file header.
	data[20], data[21], data[22], data[23] = 101, 0, 0, 0 // Raw IP
	out.Reset()
	if _, err := DecodePcap(bytes.NewReader(data), &out, nil); !errors.Is(err, ErrLinkType) || !strings.Contains(err.Error(), "link type 101 (Raw)") || out.Len() != 0 {
		t.Errorf("Raw capture: %v, printed %q", err, out.String())
	}
}
