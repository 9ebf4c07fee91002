package nodes

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/inabox/inabox/emu"
)

// build (a patched copy of frame 0) writes exactly the frame buildFull
// writes from scratch, for any sequence number, size and ECN setting.
func TestBuildFromTemplate(t *testing.T) {
	pl := emu.NewPool(emu.DefaultHeadroom, emu.DefaultMaxFrame)
	a := Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: netip.MustParseAddr("10.0.0.1"), Port: 9}
	b := Endpoint{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: netip.MustParseAddr("10.9.8.7"), Port: 4791}
	for _, size := range []int{MinSize, MinSize + 1, 308, 1500, 9000} {
		for _, ecn := range []bool{false, true} {
			tr := NewTraffic(TrafficConfig{Local: a, Remote: b, FrameBytes: size, ECN: ecn})
			for _, seq := range []uint64{0, 1, 2, 255, 256, 65535, 65536, 1<<40 - 1, 0xfedcba9876543210} {
				p := pl.Get()
				tr.build(p, seq)
				want := make([]byte, size)
				tr.buildFull(want, seq)
				if !bytes.Equal(p.Bytes(), want) {
					t.Fatalf("size %d ecn %t seq %#x: build differs from buildFull", size, ecn, seq)
				}
				pl.Put(p)
			}
		}
	}
}
