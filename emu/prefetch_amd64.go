//go:build !purego

package emu

import "unsafe"

// prefetchPacket asks the CPU to bring p's cache lines in (PREFETCHT0),
// without waiting for them: the scheduler names the packet of an arrival
// soon to fire (the one after next), loaded while the events before it
// run (Network.RunUntil). It changes no state; p may be nil.
func prefetchPacket(p *Packet) {
	if p != nil {
		prefetch3(unsafe.Pointer(p))
	}
}

//go:noescape
func prefetch3(p unsafe.Pointer)

// prefetchFrame asks for the first two cache lines of p's frame (p itself
// asked for earlier, so reading where its frame is costs little). It
// changes no state.
func prefetchFrame(p *Packet) {
	if p.off < len(p.buf) {
		prefetch2(unsafe.Pointer(&p.buf[p.off]))
	}
}

//go:noescape
func prefetch2(p unsafe.Pointer)
