package testbed

import (
	"testing"
	"time"

	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// FuzzHostReceive sends a frame the fuzzer shapes from the switch's port to
// a worker or the PS of a running all-reduce (2 workers, 3 chunks), under
// every policy: the frames a host parses come from the network, so none
// may crash a host or keep a run from ending. The frame starts as a valid
// RoCEv2 frame for one of the host's QPs carrying an INA header or a
// control message, then the fuzzer's bytes overwrite part of it; reseal
// recomputes its ICRC so that the bytes past the ICRC check are reached.
// Sums are not checked: the switch is trusted, and a frame from its port
// may change them.
func FuzzHostReceive(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(0), uint8(0), false, uint16(0), []byte{})
	f.Add(uint8(1), uint8(1), uint8(2), uint8(1), true, uint16(60), []byte{0xff, 0, 0, 1})
	f.Add(uint8(2), uint8(2), uint8(1), uint8(2), true, uint16(54), []byte{inahdr.Version, inahdr.FlagResult, 0, 1})
	f.Add(uint8(5), uint8(0), uint8(3), uint8(3), true, uint16(42), []byte{0x64, 0, 0, 0})
	f.Add(uint8(4), uint8(2), uint8(4), uint8(0), true, uint16(16), []byte{0, 200})
	policies := Names()
	f.Fuzz(func(t *testing.T, pol, target, qp, kind uint8, reseal bool, at uint16, patch []byte) {
		policy := policies[int(pol)%len(policies)]
		const elems = 3 * 64
		data := make([][]float32, 2)
		for r := range data {
			data[r] = make([]float32, elems)
			for i := range data[r] {
				data[r][i] = float32(i%7) - float32(r)
			}
		}
		c, err := Build(Spec{Seed: 1, Jobs: jobSpecs([]int{2})}, policy,
			func(job, rank int) []host.Tensor { return []host.Tensor{{AllReduce: 1, Data: data[rank]}} })
		if err != nil {
			t.Fatal(err)
		}
		// The target: worker 0 or 1, or the PS; its port and one of its QPs.
		dst, port := WorkerAddr(1, int(target%2)), c.Workers[0][target%2].Port
		qps := []uint32{WorkerQPN(1, int(target%2)), WorkerUCQPN(1, int(target%2)), RingRightQPN(1, 0), RingLeftQPN(1, 1), PSAckQPN(1)}
		if target%3 == 2 && len(c.PSs) > 0 {
			dst, port = PSAddr(0), c.PSs[0].Port
			qps = []uint32{PSQPN(1, int(at)%2), PSUCQPN(1, int(at)%2), PSCtlQPN, PSAckQPN(1), SwitchCtlQPN}
		}
		ops := []rdma.Opcode{rdma.OpUCSendOnly, rdma.OpSendOnly, rdma.OpAck, rdma.OpRDMAWriteOnly}
		op := ops[int(kind)%len(ops)]
		var payload []byte
		switch kind % 3 {
		case 0: // a result
			m := inahdr.Meta{Flags: inahdr.FlagResult, Job: 1, AllReduce: 1, Chunk: uint32(at % 4), Bitmap: 3}
			payload = inahdr.Append(nil, m, make([]int32, 64))
		case 1: // a control message
			payload = inahdr.Ctl{Op: inahdr.CtlGrant, Job: 1, AllReduce: 1, Slots: int(at % 8), Chunks: 3}.Append(nil)
		default: // whatever the patch says
			payload = append([]byte(nil), patch...)
		}
		fh := rdma.FrameHeader{Src: SwitchAddr, Dst: dst, Opcode: op, DestQP: qps[int(qp)%len(qps)], PSN: uint32(at), SrcPort: 0xC000, TTL: 64}
		b := make([]byte, fh.Len(len(payload)))
		if _, err := fh.Encode(b, payload); err != nil {
			t.Skip(err)
		}
		if off := int(at) % (len(b) + 1); kind%3 != 2 {
			copy(b[off:], patch)
		}
		if reseal {
			_ = rdma.SetICRC(b)
		}
		when := time.Duration(at%256) * 25 * time.Nanosecond // within the all-reduce (5-15 µs)
		if err := c.Net.Inject(when, SwitchNode, port, b); err != nil {
			t.Fatal(err)
		}
		// The run must end: by its own end or at the deadline.
		_, _ = c.Run(50*time.Millisecond, time.Millisecond)
	})
}
