package sw

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// expressSwitch is the switch of the express tests: job 1 of four workers
// on ports 1–4 (hashed stage, PS on port 40), port security on ports 1
// and 2 (one source each) and 3 (two sources), each worker's ina_worker
// entry in its port's cache (one contribution each to chunk 0 of
// all-reduce 3), and the PS's in port 40's.
func expressSwitch(tb testing.TB) *Switch {
	tb.Helper()
	s := newTestSwitch(tb, 64)
	if err := s.SetPool(1, 0, 64, 4); err != nil {
		tb.Fatal(err)
	}
	installJob(tb, s, 1, 4, StageHashed, 1, 0, 40)
	for w := range 2 {
		if err := s.SetPortSource(w+1, PortSource{MAC: mac(uint8(w) + 1), IP: ip(uint8(w) + 1)}); err != nil {
			tb.Fatal(err)
		}
	}
	for _, a := range []uint8{3, 7} { // port 3: worker 2's host and another
		if err := s.AddPortSource(3, PortSource{MAC: mac(a), IP: ip(a)}); err != nil {
			tb.Fatal(err)
		}
	}
	for w := range 4 {
		s.Process([]Frame{{Data: workerPkt(1, 3, 0, uint8(w), []int32{1}).build(), InPort: w + 1}})
	}
	s.Process([]Frame{{Data: psLookalike(), InPort: 40}}) // the PS's entry in port 40's cache
	return s
}

// psLookalike is a frame from the PS of expressSwitch's job shaped like a
// contribution of worker 0 (the PS entry's worker field): no flag, bitmap
// 1. It is the PS's, and not express's to take.
func psLookalike() []byte {
	p := workerPkt(1, 3, 2, 0, []int32{1})
	p.qp = qpFor(1, 0xFF)
	return p.build()
}

// expressSame runs frame through express on one expressSwitch and through
// parse and classify on another, and fails unless the two leave the same
// metadata, frame and switch; where express declines, its switch and
// frame must be as they were. It reports whether express took the frame.
func expressSame(t *testing.T, frame []byte, port int, sealed bool) bool {
	t.Helper()
	a, b := expressSwitch(t), expressSwitch(t)
	fa := Frame{Data: append([]byte(nil), frame...), InPort: port, Sealed: sealed}
	fb := Frame{Data: append([]byte(nil), frame...), InPort: port, Sealed: sealed}
	var ma, mb pmeta
	took := a.express(&fa, &ma)
	if !took {
		if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(fa, fb) {
			t.Fatal("express declined the frame but changed the switch or the frame")
		}
		return false
	}
	b.parse(&fb, &mb)
	b.classify(&fb, &mb)
	if !bytes.Equal(ma.pkt.hdr, mb.pkt.hdr) || ma.pkt.hdr == nil {
		t.Fatalf("INA header: express %x, parse %x", []byte(ma.pkt.hdr), []byte(mb.pkt.hdr))
	}
	ma.pkt.hdr, mb.pkt.hdr = nil, nil // they alias their own frames
	if !reflect.DeepEqual(ma, mb) {
		t.Fatalf("metadata: express %+v, parse and classify %+v", ma, mb)
	}
	if !reflect.DeepEqual(fa, fb) {
		t.Fatalf("frame: express %+v, parse and classify %+v", fa, fb)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("the switch after express differs from the one after parse and classify: stats %+v and %+v", a.Stats(), b.Stats())
	}
	return true
}

// expressFrames are contributions express takes and frames one field away
// from them, which parse and classify must refuse or treat alike.
func expressFrames() (frames [][]byte, ports []int) {
	add := func(d []byte, port int) {
		frames, ports = append(frames, d), append(ports, port)
	}
	for w := range 4 {
		add(workerPkt(1, 3, 1, uint8(w), []int32{5, -6, 7}).build(), w+1)
	}
	uc := workerPkt(1, 3, 2, 2, make([]int32, 64))
	uc.opcode = byte(rdma.OpUCSendOnly)
	uc.qp = qpFor(1, 2)
	add(uc.build(), 3)
	add(workerPkt(1, 4, 2, 3, make([]int32, 256)).build(), 4) // the window moves
	add(workerPkt(1, 1, 2, 3, []int32{1}).build(), 4)         // stale all-reduce
	add(workerPkt(1, 3, 2, 0, []int32{1}).build(), 2)         // another worker's port
	p := workerPkt(1, 3, 2, 1, []int32{1})
	p.srcMAC = mac(9) // spoofed: not the port's source
	add(p.build(), 2)
	p = workerPkt(1, 3, 2, 1, []int32{1})
	p.src = ip(9) // spoofed: the port's MAC, another IPv4 source
	add(p.build(), 2)
	add(workerPkt(1, 3, 2, 2, []int32{1}).build(), 4) // no cache hit
	add(workerPkt(2, 3, 2, 0, []int32{1}).build(), 1) // another job
	wr := workerPkt(1, 3, 2, 1, []int32{1})
	wr.opcode = 0x0A // RDMA WRITE Only: a RETH before the INA header
	add(wr.build(), 2)
	p = workerPkt(1, 3, 2, 1, []int32{1})
	p.meta.Flags = inahdr.FlagResend
	add(p.build(), 2)
	p = workerPkt(1, 3, 2, 1, []int32{1})
	p.meta.Bitmap = 3
	add(p.build(), 2)
	d := workerPkt(1, 3, 2, 1, []int32{1, 2}).build()
	d[len(d)-1] ^= 1 // bad ICRC
	add(d, 2)
	d = workerPkt(1, 3, 2, 1, []int32{1, 2}).build()
	add(append(d, 0, 0, 0, 0), 2) // Ethernet padding
	d = workerPkt(1, 3, 2, 1, []int32{1, 2}).build()
	d[23] = 6 // TCP
	add(d, 2)
	p = workerPkt(1, 3, 2, 2, []int32{1})
	p.srcMAC = mac(7) // port 3's other source's MAC, worker 2's IPv4
	add(p.build(), 3)
	p = workerPkt(1, 3, 2, 2, []int32{1})
	p.srcMAC, p.src = mac(7), ip(7) // port 3's other source
	add(p.build(), 3)
	add(psLookalike(), 40)
	// Worker 3's contribution on port 4 (no port security), one field off:
	// every field express's words check, alone.
	for _, edit := range []func(d []byte){
		func(d []byte) { d[12], d[13] = 0x86, 0xDD },     // EtherType IPv6
		func(d []byte) { d[14] = 0x46 },                  // IPv4 IHL 6
		func(d []byte) { d[23] = 6 },                     // TCP
		func(d []byte) { d[37]++ },                       // UDP port 4792
		func(d []byte) { d[42] = byte(rdma.OpSendLast) }, // RC SEND Last
		func(d []byte) { d[49]++ },                       // another QP
		func(d []byte) { d[54] = 0xA2 },                  // INA version
		func(d []byte) { d[55] = inahdr.FlagResend },     // a flag
		func(d []byte) { d[57] = 2 },                     // job 2
		func(d []byte) { d[66] = 2 },                     // worker 2, worker 3's bitmap
		func(d []byte) { d[73] = 1 << 2 },                // worker 3, worker 2's bitmap
	} {
		d := workerPkt(1, 3, 2, 3, []int32{1, 2}).build()
		edit(d)
		add(d, 4)
	}
	return frames, ports
}

// TestExpress: express takes the common contributions and leaves the
// switch as parse and classify do; it declines the rest unchanged.
func TestExpress(t *testing.T) {
	frames, ports := expressFrames()
	took := 0
	for i, d := range frames {
		for _, sealed := range []bool{false, true} {
			if expressSame(t, d, ports[i], sealed) {
				took++
			}
		}
	}
	// The four workers, UC, the window's move, the padded frame and port
	// 3's other source, sealed or not, and the bad ICRC sealed (a sealed
	// frame's ICRC is trusted).
	if want := 2*8 + 1; took != want {
		t.Fatalf("express took %d frames, want %d", took, want)
	}
}

// FuzzExpress holds express equal to parse and classify for any frame on
// any port.
func FuzzExpress(f *testing.F) {
	frames, ports := expressFrames()
	for i, d := range frames {
		f.Add(d, uint8(min(ports[i], 8)), false)
	}
	f.Fuzz(func(t *testing.T, frame []byte, port uint8, sealed bool) {
		p := int(port % 9) // ports 0–7, and the PS's
		if p == 8 {
			p = 40
		}
		expressSame(t, frame, p, sealed)
	})
}

// TestExpressSourceChange: port security installed after a worker's frames
// filled its port's cache applies to the next frame.
func TestExpressSourceChange(t *testing.T) {
	s := newTestSwitch(t, 64)
	if err := s.SetPool(1, 0, 64, 4); err != nil {
		t.Fatal(err)
	}
	installJob(t, s, 1, 2, StageHashed, 1, 0, 40)
	frames := []Frame{{Data: workerPkt(1, 1, 0, 0, []int32{1}).build(), InPort: 1}}
	s.Process(frames)
	if frames[0].Reason != ReasonAbsorbed {
		t.Fatalf("first contribution: %v", frames[0].Reason)
	}
	if err := s.SetPortSource(1, PortSource{MAC: mac(9), IP: ip(9)}); err != nil {
		t.Fatal(err)
	}
	frames = []Frame{{Data: workerPkt(1, 1, 1, 0, []int32{1}).build(), InPort: 1}}
	s.Process(frames)
	if frames[0].Reason != ReasonSpoofed {
		t.Fatalf("contribution from a source the port no longer accepts: %v, want %v", frames[0].Reason, ReasonSpoofed)
	}
}

// TestExpressJobChange: a job installed again without a worker, or
// removed, after that worker's frames filled its port's cache, decides
// the worker's next frame as it does on a switch whose cache never held
// the worker.
func TestExpressJobChange(t *testing.T) {
	for _, change := range []string{"mask", "remove"} {
		var reasons [2]Reason
		for i, warm := range []bool{true, false} {
			s := newTestSwitch(t, 64)
			if err := s.SetPool(1, 0, 64, 4); err != nil {
				t.Fatal(err)
			}
			installJob(t, s, 1, 2, StageHashed, 1, 0, 40)
			if warm {
				frames := []Frame{{Data: workerPkt(1, 1, 0, 0, []int32{1}).build(), InPort: 1}}
				s.Process(frames)
				if frames[0].Reason != ReasonAbsorbed {
					t.Fatalf("first contribution: %v", frames[0].Reason)
				}
			}
			if change == "mask" {
				if err := s.SetJob(JobSpec{ID: 1, Mask: 2, Group: 1, PSPort: 40, PolicyID: StageHashed, PoolID: 1}); err != nil {
					t.Fatal(err)
				}
			} else {
				s.RemoveJob(1)
			}
			frames := []Frame{{Data: workerPkt(1, 1, 1, 0, []int32{1}).build(), InPort: 1}}
			s.Process(frames)
			reasons[i] = frames[0].Reason
		}
		if reasons[0] != reasons[1] || reasons[0] == ReasonAbsorbed {
			t.Fatalf("%s: worker 0's frame after the change: %v with its cache filled, %v without", change, reasons[0], reasons[1])
		}
	}
}
