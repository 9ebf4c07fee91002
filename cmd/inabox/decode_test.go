package main

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// roceFrame encodes payload as one RoCEv2 frame of opcode op.
func roceFrame(t *testing.T, op rdma.Opcode, psn uint32, payload []byte) []byte {
	t.Helper()
	h := rdma.FrameHeader{
		Src:     rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.1.0.1")},
		Dst:     rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.255.0.1")},
		SrcPort: 50000, Opcode: op, DestQP: 0x100, PSN: psn, VA: 0x40, RKey: 0xB, DMALength: uint32(len(payload)), Imm: 7,
	}
	buf := make([]byte, h.Len(len(payload)))
	n, err := h.Encode(buf, payload)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// writeCapture writes frames as a pcap (or, with ng, a pcapng) of link type lt.
func writeCapture(t *testing.T, path string, lt layers.LinkType, ng bool, frames [][]byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var write func(gopacket.CaptureInfo, []byte) error
	var flush func() error
	if ng {
		w, err := pcapgo.NewNgWriter(f, lt)
		if err != nil {
			t.Fatal(err)
		}
		write, flush = w.WritePacket, w.Flush
	} else {
		w := pcapgo.NewWriter(f)
		if err := w.WriteFileHeader(65536, lt); err != nil {
			t.Fatal(err)
		}
		write, flush = w.WritePacket, func() error { return nil }
	}
	for i, fr := range frames {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, int64(i)), CaptureLength: len(fr), Length: len(fr)}
		if err := write(ci, fr); err != nil {
			t.Fatal(err)
		}
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDecodeINA: `inabox decode` names UC opcodes, prints control messages
// by name with their fields and the switch's absorbed markers, keeps data
// headers as before, and --job shows only that job's frames (numbered as in
// the capture).
func TestDecodeINA(t *testing.T) {
	data := func(job uint16, flags uint8) []byte {
		return inahdr.Append(nil, inahdr.Meta{Flags: flags, Job: job, AllReduce: 3, Chunk: 9, Worker: 1, Bitmap: 2}, []int32{1, 2})
	}
	absorbed := make([]byte, inahdr.Len)
	inahdr.Header(absorbed).Encode(inahdr.Meta{Flags: inahdr.FlagCtl, Job: 2, AllReduce: 3, Chunk: 4, Worker: 1, Bitmap: 2})
	frames := [][]byte{
		roceFrame(t, rdma.OpUCSendOnly, 1, data(1, 0)),
		roceFrame(t, rdma.OpSendOnly, 2, inahdr.Ctl{Op: inahdr.CtlPlan, Job: 2, AllReduce: 9, Chunks: 100, Slots: 64, PSChunks: 36}.Append(nil)),
		roceFrame(t, rdma.OpUCSendOnly, 3, inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 9, Chunks: 100, Want: 64, Exact: true}.Append(nil)),
		roceFrame(t, rdma.OpUCRDMAWriteOnlyImm, 4, data(2, inahdr.FlagResult)),
		roceFrame(t, rdma.OpSendOnly, 5, absorbed),
		roceFrame(t, rdma.OpUCSendOnly, 6, inahdr.Ctl{Op: 7, Job: 2, AllReduce: 1}.Append(nil)),
		roceFrame(t, rdma.OpSendOnly, 7, data(2, inahdr.FlagBypass)),
		roceFrame(t, rdma.OpUCSendOnlyImm, 8, []byte("not INA")),
	}
	path := filepath.Join(t.TempDir(), "ina.pcap")
	writeCapture(t, path, layers.LinkTypeEthernet, false, frames)

	var out, errb bytes.Buffer
	if err := runCLI([]string{"decode", path}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	lines := strings.Split(out.String(), "\n")
	for i, want := range []string{
		"1 10.1.0.1:50000 -> 10.255.0.1:4791 RRoCE UC SEND Only QP=0x000100 PSN=1 len=28 {INA job=1 allreduce=3 chunk=9 worker=1 bitmap=0x2 count=2 exp=0 slot=0 flags=[]} ICRC ok",
		"2 10.1.0.1:50000 -> 10.255.0.1:4791 RRoCE SEND Only QP=0x000100 PSN=2 len=20 {INA PLAN job=2 allreduce=9 chunks=100 slots=64 ps-chunks=36} ICRC ok",
		"3 10.1.0.1:50000 -> 10.255.0.1:4791 RRoCE UC SEND Only QP=0x000100 PSN=3 len=20 {INA ALLOC job=1 allreduce=9 chunks=100 want=64 exact} ICRC ok",
		"4 10.1.0.1:50000 -> 10.255.0.1:4791 RRoCE UC RDMA WRITE Only with Immediate QP=0x000100 PSN=4 RETH(va=0x40 rkey=0xb len=28) Imm=0x00000007 len=28 {INA job=2 allreduce=3 chunk=9 worker=1 bitmap=0x2 count=2 exp=0 slot=0 flags=[result]} ICRC ok",
		"5 10.1.0.1:50000 -> 10.255.0.1:4791 RRoCE SEND Only QP=0x000100 PSN=5 len=20 {INA absorbed job=2 allreduce=3 chunk=4 worker=1 bitmap=0x2 exp=0 slot=0 flags=[ctl]} ICRC ok",
		"6 10.1.0.1:50000 -> 10.255.0.1:4791 RRoCE UC SEND Only QP=0x000100 PSN=6 len=20 {INA control malformed: inahdr: unknown control opcode: CtlOp(7) job=2 allreduce=1} ICRC ok",
		"7 10.1.0.1:50000 -> 10.255.0.1:4791 RRoCE SEND Only QP=0x000100 PSN=7 len=28 {INA job=2 allreduce=3 chunk=9 worker=1 bitmap=0x2 count=2 exp=0 slot=0 flags=[bypass]} ICRC ok",
		"8 10.1.0.1:50000 -> 10.255.0.1:4791 RRoCE UC SEND Only with Immediate QP=0x000100 PSN=8 Imm=0x00000007 len=7 {payload 7 B (no INA header)} ICRC ok",
		"8 frames: 8 RoCEv2, 0 other, 0 bad ICRC, 0 malformed",
		"  SEND Only                        3",
		"  UC SEND Only                     3",
		"  UC SEND Only with Immediate      1",
		"  UC RDMA WRITE Only with Immediate 1",
	} {
		if i >= len(lines) || lines[i] != want {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, lines[min(i, len(lines)-1)], want)
		}
	}

	// --job 2: the frames of job 2 (data and control), numbered as in the capture.
	out.Reset()
	if err := runCLI([]string{"decode", "--job", "2", path}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var nums []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(l, " ") && strings.Contains(l, "RRoCE") {
			nums = append(nums, f[0])
			if !strings.Contains(l, "job=2 ") {
				t.Errorf("--job 2 shows %q", l)
			}
		}
	}
	if strings.Join(nums, " ") != "2 4 5 6 7" {
		t.Errorf("--job 2 shows frames %v, want 2 4 5 6 7:\n%s", nums, out.String())
	}
	if !strings.Contains(out.String(), "5 of 8 frames shown: 5 RoCEv2, 0 other, 0 bad ICRC, 0 malformed\n") {
		t.Errorf("--job 2 counts:\n%s", out.String())
	}
	out.Reset()
	if err := runCLI([]string{"decode", path, "--job", "3"}, &out, &errb); err != nil || !strings.HasPrefix(out.String(), "0 of 8 frames shown") {
		t.Errorf("--job 3: %v\n%s", err, out.String())
	}
	for _, bad := range []string{"0", "65536", "x"} {
		var ue usageError
		if err := runCLI([]string{"decode", "--job", bad, path}, &out, &errb); !errors.As(err, &ue) || !strings.Contains(err.Error(), "job") {
			t.Errorf("--job %s: %v, want a usage error", bad, err)
		}
	}
}

// TestDecodeLinkType: a capture whose link type is not Ethernet is refused
// with an error naming the link type, pcap and pcapng alike; an Ethernet
// pcapng is read.
func TestDecodeLinkType(t *testing.T) {
	frame := roceFrame(t, rdma.OpUCSendOnly, 1, inahdr.Ctl{Op: inahdr.CtlFree, Job: 1, AllReduce: 2}.Append(nil))
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		lt   layers.LinkType
		ng   bool
		want string
	}{
		{"raw.pcap", layers.LinkTypeRaw, false, "link type 101 (Raw): only Ethernet (1) is decoded"},
		{"sll.pcapng", layers.LinkTypeLinuxSLL, true, "link type 113 (Linux SLL): only Ethernet (1) is decoded"},
		{"odd.pcap", layers.LinkType(147), false, "link type 147: only Ethernet (1) is decoded"},
		{"eth.pcapng", layers.LinkTypeEthernet, true, ""},
	} {
		path := filepath.Join(dir, c.name)
		writeCapture(t, path, c.lt, c.ng, [][]byte{frame})
		var out, errb bytes.Buffer
		err := runCLI([]string{"decode", path}, &out, &errb)
		if c.want == "" {
			if err != nil || !strings.Contains(out.String(), "{INA FREE job=1 allreduce=2}") {
				t.Errorf("%s: %v\n%s", c.name, err, out.String())
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) || !errors.Is(err, rdma.ErrLinkType) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%s: printed %q", c.name, out.String())
		}
	}
}
