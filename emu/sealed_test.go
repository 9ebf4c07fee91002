package emu_test

import (
	"testing"

	"github.com/inabox/inabox/emu"
)

// sealedSender sends n frames, each sealed.
type sealedSender struct{ n int }

func (s *sealedSender) Start(env *emu.Env) {
	for i := 0; i < s.n; i++ {
		p := env.NewPacket()
		p.SetBytes(make([]byte, 100))
		p.Sealed = true
		env.Send(0, p)
	}
}
func (s *sealedSender) Timer(*emu.Env, uint64)               {}
func (s *sealedSender) Receive(*emu.Env, int, []*emu.Packet) {}

// sealedCounter counts the frames it receives and how many are sealed.
type sealedCounter struct{ got, sealed int }

func (c *sealedCounter) Start(*emu.Env)         {}
func (c *sealedCounter) Timer(*emu.Env, uint64) {}
func (c *sealedCounter) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, p := range pkts {
		c.got++
		if p.Sealed {
			c.sealed++
		}
		env.Free(p)
	}
}

// TestSealed: a sealed frame arrives sealed over a clean link, and so do
// both copies of a duplicated one; a bit flipped past the FCS clears it; a
// packet from the pool is never sealed and a clone keeps its original's.
func TestSealed(t *testing.T) {
	for _, c := range []struct {
		name           string
		im             emu.Impairments
		got, sealedMin int
	}{
		{"clean", emu.Impairments{}, 50, 50},
		{"duplicate", emu.Impairments{Duplicate: 1}, 100, 100},
		{"corrupt-past-fcs", emu.Impairments{CorruptUndetected: 1}, 50, 0},
	} {
		n := emu.NewNetwork(emu.Config{Seed: 1})
		rx := &sealedCounter{}
		must(t, n.AddNode("tx", 1, &sealedSender{n: 50}))
		must(t, n.AddNode("rx", 1, rx))
		_, err := n.Connect("tx", 0, "rx", 0, emu.LinkConfig{BitsPerSecond: 1e9, Impairments: c.im})
		must(t, err)
		run(t, n)
		if rx.got != c.got || rx.sealed < c.sealedMin || (c.sealedMin == 0 && rx.sealed != 0) {
			t.Fatalf("%s: %d frames, %d sealed; want %d, %d sealed", c.name, rx.got, rx.sealed, c.got, c.sealedMin)
		}
	}
	pool := emu.NewPool(emu.DefaultHeadroom, emu.DefaultMaxFrame)
	p := pool.Get()
	p.SetBytes([]byte{1, 2, 3})
	p.Sealed = true
	if c := pool.Clone(p); !c.Sealed {
		t.Fatal("a clone of a sealed packet is not sealed")
	}
	p.Reset(0)
	if p.Sealed {
		t.Fatal("Reset kept Sealed")
	}
	p.Sealed = true
	pool.Put(p)
	for range 100 {
		if q := pool.Get(); q.Sealed {
			t.Fatal("a packet from the pool is sealed")
		}
	}
}
