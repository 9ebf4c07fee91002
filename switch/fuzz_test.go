package sw

import (
	"testing"

	"github.com/inabox/inabox/rdma"
)

// FuzzPipeline feeds arbitrary frames to a configured switch: it must not
// panic, every RoCE frame it emits must carry a valid ICRC, and a frame
// from an uninstalled port never changes slot state.
func FuzzPipeline(f *testing.F) {
	f.Add(workerPkt(1, 1, 0, 0, []int32{1, 2, 3}).build(), uint8(1))
	f.Add(workerPkt(1, 1, 0, 1, make([]int32, 256)).build(), uint8(2))
	p := workerPkt(1, 1, 0, 0, []int32{1})
	p.opcode = 0x0B
	f.Add(p.build(), uint8(1))
	f.Add(plainUDP(mac(0x30), ip(0x31), 4791), uint8(3))
	f.Fuzz(func(t *testing.T, frame []byte, port uint8) {
		s := newTestSwitch(t, 64)
		s.SetPool(1, 0, 64, 4)
		installJob(t, s, 1, 2, StagePreemptive, 1, 0, 40)
		s.AddL2(mac(0x30), 30)
		for _, o := range runBatch(s, []Frame{{Data: append([]byte(nil), frame...), InPort: int(port % 8)}}) {
			if isRoCE(o.frame) && o.why != ReasonForward && !rdma.CheckICRC(o.frame) {
				t.Fatalf("emitted frame with bad ICRC (%v)", o.why)
			}
		}
		if port%8 > 2 && port%8 != 40 {
			if st := s.Stats(); st.SlotsFree != 64 {
				t.Fatalf("frame from uninstalled port %d claimed a slot", port%8)
			}
		}
	})
}
