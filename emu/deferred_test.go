package emu_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/inabox/inabox/emu"
)

// sealSum writes the CRC-32 of the rest of frame into its last four bytes:
// the check the tests below defer.
func sealSum(frame []byte) {
	n := len(frame) - 4
	binary.LittleEndian.PutUint32(frame[n:], crc32.ChecksumIEEE(frame[:n]))
}

// sumOK reports whether frame's last four bytes hold sealSum's check.
func sumOK(frame []byte) bool {
	n := len(frame) - 4
	return binary.LittleEndian.Uint32(frame[n:]) == crc32.ChecksumIEEE(frame[:n])
}

// deferSender sends n 100-byte frames with their check deferred, frame i
// filled with byte i; with unseal, it clears Sealed before sending.
type deferSender struct {
	n      int
	unseal bool
}

func (s *deferSender) Start(env *emu.Env) {
	for i := 0; i < s.n; i++ {
		p := env.NewPacket()
		p.SetBytes(bytes.Repeat([]byte{byte(i + 1)}, 100))
		binary.LittleEndian.PutUint32(p.Bytes()[96:], 0xDEADBEEF) // not the check
		p.Defer(sealSum)
		if !p.Sealed || !p.Deferred() {
			panic("Defer: not sealed and deferred")
		}
		if s.unseal {
			p.Sealed = false
		}
		env.Send(0, p)
	}
}
func (s *deferSender) Timer(*emu.Env, uint64)               {}
func (s *deferSender) Receive(*emu.Env, int, []*emu.Packet) {}

// deferReceiver records what arrives: each frame's bytes as they arrived,
// whether it was still deferred, and its bytes once finished.
type deferReceiver struct {
	aware              bool
	arrived, finished  [][]byte
	deferred, notValid int
}

func (r *deferReceiver) AcceptsDeferred() bool  { return r.aware }
func (r *deferReceiver) Start(*emu.Env)         {}
func (r *deferReceiver) Timer(*emu.Env, uint64) {}
func (r *deferReceiver) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, p := range pkts {
		r.arrived = append(r.arrived, bytes.Clone(p.Bytes()))
		if p.Deferred() {
			r.deferred++
		}
		p.Finish()
		if p.Deferred() {
			panic("Finish left the frame deferred")
		}
		if !sumOK(p.Bytes()) {
			r.notValid++
		}
		r.finished = append(r.finished, bytes.Clone(p.Bytes()))
		env.Free(p)
	}
}

// TestDeferredCheck: a frame whose check is deferred reaches a node that
// accepts deferred frames unfinished and any other node finished; a
// capture, a bit flip and a send with Sealed cleared each finish it first,
// so every frame seen outside the nodes carries its check; a clone is
// deferred as its original was, and a packet from the pool never is.
func TestDeferredCheck(t *testing.T) {
	const frames = 20
	for _, c := range []struct {
		name          string
		aware, unseal bool
		capture       bool
		im            emu.Impairments
		deferred      int // frames that arrive deferred
		flipped       int // frames that arrive one bit off their check
	}{
		{name: "aware", aware: true, deferred: frames},
		{name: "not-aware", aware: false},
		{name: "aware-captured", aware: true, capture: true},
		{name: "aware-unsealed", aware: true, unseal: true},
		{name: "aware-corrupted", aware: true, im: emu.Impairments{CorruptUndetected: 1}, flipped: frames},
		{name: "aware-duplicated", aware: true, im: emu.Impairments{Duplicate: 1}, deferred: 2 * frames},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := emu.NewNetwork(emu.Config{Seed: 1})
			rx := &deferReceiver{aware: c.aware}
			must(t, n.AddNode("tx", 1, &deferSender{n: frames, unseal: c.unseal}))
			must(t, n.AddNode("rx", 1, rx))
			_, err := n.Connect("tx", 0, "rx", 0, emu.LinkConfig{BitsPerSecond: 1e9, Impairments: c.im})
			must(t, err)
			var pcap bytes.Buffer
			if c.capture {
				must(t, n.Capture("tx", 0, &pcap))
			}
			run(t, n)
			want := frames
			if c.im.Duplicate > 0 {
				want *= 2
			}
			if len(rx.arrived) != want || rx.deferred != c.deferred {
				t.Fatalf("%d frames arrived, %d deferred; want %d, %d", len(rx.arrived), rx.deferred, want, c.deferred)
			}
			if rx.notValid != c.flipped {
				t.Fatalf("%d frames without their check after Finish, want %d", rx.notValid, c.flipped)
			}
			for i, a := range rx.arrived {
				deferred := i < rx.deferred
				if deferred && !bytes.Equal(a[96:], []byte{0xEF, 0xBE, 0xAD, 0xDE}) {
					t.Fatalf("frame %d arrived deferred with its check written", i)
				}
				if !deferred && !bytes.Equal(a, rx.finished[i]) {
					t.Fatalf("frame %d arrived unfinished but not deferred", i)
				}
				if c.flipped > 0 {
					good := bytes.Clone(a)
					sealSum(good)
					diff := 0
					for j := range a {
						diff += bits.OnesCount8(a[j] ^ good[j])
					}
					// The flip corrupted the finished frame: one bit of
					// the data (the check then differs in many) or of the
					// check itself.
					if diff == 0 {
						t.Fatalf("frame %d: no bit flipped", i)
					}
					if sumOK(a) {
						t.Fatalf("frame %d: corrupted but its check holds", i)
					}
				}
			}
			if c.capture {
				// Every captured frame carries its check.
				recs := pcapFrames(t, pcap.Bytes())
				if len(recs) != frames {
					t.Fatalf("%d frames captured, want %d", len(recs), frames)
				}
				for i, f := range recs {
					if !sumOK(f) {
						t.Fatalf("captured frame %d lacks its check", i)
					}
				}
			}
		})
	}
	pool := emu.NewPool(emu.DefaultHeadroom, emu.DefaultMaxFrame)
	p := pool.Get()
	p.SetBytes(make([]byte, 8))
	p.Defer(sealSum)
	c := pool.Clone(p)
	if !c.Deferred() || !c.Sealed {
		t.Fatal("a clone of a deferred packet is not deferred")
	}
	c.Finish()
	if !sumOK(c.Bytes()) || !p.Deferred() || sumOK(p.Bytes()) {
		t.Fatal("finishing a clone finished its original")
	}
	pool.Put(p)
	for range 100 {
		if q := pool.Get(); q.Deferred() {
			t.Fatal("a packet from the pool is deferred")
		}
	}
}

// pcapFrames returns the frames of a pcap file.
func pcapFrames(t *testing.T, b []byte) [][]byte {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(b))
	must(t, err)
	var out [][]byte
	for {
		d, _, err := r.ReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, d)
	}
}
