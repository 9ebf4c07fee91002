package sw

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// pkt describes a test INA frame.
type pkt struct {
	srcMAC, dstMAC [6]byte
	src, dst       netip.Addr
	qp             uint32
	psn            uint32
	opcode         byte
	meta           inahdr.Meta
	vals           []int32
}

// Offsets of the headers of a test frame.
const (
	offIP  = rdma.EthLen
	offUDP = offIP + rdma.IPv4Len
	offBTH = rdma.HeadersLen
)

// inaExt returns the length of the transport headers before the INA
// header for the opcodes that carry INA (RC/UC SEND/WRITE Only [with
// immediate]), or -1.
func inaExt(op byte) int {
	if o := rdma.Opcode(op); o.IsSendOrWriteOnly() {
		return o.HeaderLen()
	}
	return -1
}

func mac(b byte) [6]byte   { return [6]byte{0x02, 0, 0, 0, 0, b} }
func ip(b byte) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, b}) }

// workerPkt is a contribution of worker w of job to chunk.
func workerPkt(job uint16, ar uint16, chunk uint32, w uint8, vals []int32) pkt {
	return pkt{srcMAC: mac(w + 1), dstMAC: mac(100), src: ip(w + 1), dst: ip(100),
		qp: qpFor(job, w), opcode: 0x04,
		meta: inahdr.Meta{Job: job, AllReduce: ar, Chunk: chunk, Worker: w, Bitmap: 1 << w}, vals: vals}
}

func qpFor(job uint16, w uint8) uint32 { return uint32(job)<<8 | uint32(w) | 0x100000 }

// build serializes p as Eth/IPv4/UDP/BTH[/ext]/INA/values/ICRC.
func (p pkt) build() []byte {
	ext := inaExt(p.opcode) - rdma.BTHLen
	if ext < 0 {
		ext = 0
	}
	payload := inahdr.Append(nil, p.meta, p.vals)
	pad := rdma.PadFor(len(payload))
	ulen := 8 + rdma.BTHLen + ext + len(payload) + pad + 4
	b := make([]byte, 14+20+ulen)
	copy(b[0:6], p.dstMAC[:])
	copy(b[6:12], p.srcMAC[:])
	b[12], b[13] = 0x08, 0x00
	iph := b[14:34]
	iph[0] = 0x45
	iph[1] = 0x02
	binary.BigEndian.PutUint16(iph[2:], uint16(20+ulen))
	iph[6] = 0x40
	iph[8] = 64
	iph[9] = 17
	s4, d4 := p.src.As4(), p.dst.As4()
	copy(iph[12:], s4[:])
	copy(iph[16:], d4[:])
	rdma.IPv4(iph).UpdateChecksum()
	u := b[34:42]
	binary.BigEndian.PutUint16(u[0:], 0xC000|uint16(p.qp&0x3FFF))
	binary.BigEndian.PutUint16(u[2:], rdma.UDPPort)
	binary.BigEndian.PutUint16(u[4:], uint16(ulen))
	bth := rdma.BTH(b[42:54])
	bth.SetOpcode(rdma.Opcode(p.opcode))
	bth.SetPadCount(pad)
	bth.SetPKey(0xFFFF)
	bth.SetDestQP(p.qp)
	bth.SetPSN(p.psn)
	copy(b[54+ext:], payload)
	if err := rdma.SetICRC(b); err != nil {
		panic(err)
	}
	return b
}

func newTestSwitch(t testing.TB, slots int) *Switch {
	t.Helper()
	s, err := New(Config{Slots: slots, Ports: 64})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// installJob installs a job with n workers on ports 1..n, PS on port psPort,
// multicast group = job, rids job*100+w.
func installJob(t testing.TB, s *Switch, job uint16, n int, stage int, pool uint16, prio uint8, psPort int) {
	t.Helper()
	var members []McastMember
	for w := 0; w < n; w++ {
		if err := s.AddWorker(WorkerEntry{Port: w + 1, QP: qpFor(job, uint8(w)), Job: job, Worker: uint8(w), RID: job*100 + uint16(w)}); err != nil {
			t.Fatal(err)
		}
		members = append(members, McastMember{RID: job*100 + uint16(w), Port: w + 1})
		s.SetRewrite(job*100+uint16(w), Rewrite{SrcMAC: mac(100), DstMAC: mac(uint8(w) + 1), SrcIP: ip(100), DstIP: ip(uint8(w) + 1), DstQP: qpFor(job, uint8(w))})
	}
	if err := s.AddWorker(WorkerEntry{Port: psPort, QP: qpFor(job, 0xFF), Job: job, PS: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMcastGroup(job, members...); err != nil {
		t.Fatal(err)
	}
	mask := uint32(1<<n - 1)
	if n == 32 {
		mask = 0xFFFFFFFF
	}
	if err := s.SetJob(JobSpec{ID: job, Mask: mask, Group: job, PSPort: psPort, Priority: prio, PolicyID: stage, PoolID: pool}); err != nil {
		t.Fatal(err)
	}
}

// run processes frames one batch and returns copies of the outputs as
// (port, frame) pairs, expanding multicast through Egress.
type out struct {
	port  int
	frame []byte
	why   Reason
}

func run(s *Switch, frames ...[]byte) []out {
	batch := make([]Frame, len(frames))
	for i, f := range frames {
		batch[i] = Frame{Data: append([]byte(nil), f...), InPort: inPortOf(f)}
	}
	return runBatch(s, batch)
}

func runBatch(s *Switch, batch []Frame) []out {
	s.Process(batch)
	var res []out
	for _, f := range batch {
		switch f.Action {
		case ActForward:
			res = append(res, out{f.OutPort, f.Data, f.Reason})
		case ActMulticast:
			for _, m := range s.AppendMembers(nil, f.Group) {
				c := append([]byte(nil), f.Data...)
				s.Egress(c, m)
				res = append(res, out{m.Port, c, f.Reason})
			}
		case ActForwardMulticast: // the frame to OutPort, UC replicas to the group
			res = append(res, out{f.OutPort, f.Data, f.Reason})
			for _, m := range s.AppendMembers(nil, f.Group) {
				c := append([]byte(nil), f.Data...)
				s.EgressUC(c, m)
				res = append(res, out{m.Port, c, f.Reason})
			}
		}
	}
	return res
}

// inPortOf derives the test ingress port from the source MAC's last byte
// (workers w sit on port w+1; the PS uses MAC 100 → port 40 in tests).
func inPortOf(f []byte) int {
	if f[11] == 100 {
		return 40
	}
	return int(f[11])
}

func resultOf(t testing.TB, o out) (inahdr.Meta, []int32) {
	t.Helper()
	if !rdma.CheckICRC(o.frame) {
		t.Fatalf("bad ICRC on output to port %d", o.port)
	}
	ext := inaExt(o.frame[offBTH]) - rdma.BTHLen
	m, v, err := inahdr.Decode(o.frame[offBTH+rdma.BTHLen+ext:])
	if err != nil {
		t.Fatal(err)
	}
	return m, v
}

func netipPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

type netipAddrT = netip.Addr

func netipAddrT4(a, b, c, d byte) netip.Addr { return netip.AddrFrom4([4]byte{a, b, c, d}) }
