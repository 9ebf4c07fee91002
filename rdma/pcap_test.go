package rdma

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	writePcap(t, path, all)
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
