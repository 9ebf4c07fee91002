package emu

import (
	"unsafe"

	"github.com/inabox/inabox/internal/prefetch"
)

// prefetchPacket asks the CPU for p's cache lines (internal/prefetch):
// the scheduler names the packet of an arrival soon to fire (the one
// after next), loaded while the events before it run (Network.RunUntil).
// It changes no state; p may be nil.
func prefetchPacket(p *Packet) {
	if p != nil {
		prefetch.Lines(unsafe.Pointer(p), int(unsafe.Sizeof(*p)))
	}
}

// prefetchFrame asks for the first two cache lines of p's frame (p itself
// asked for earlier, so reading where its frame is costs little). It
// changes no state.
func prefetchFrame(p *Packet) {
	if p.off < len(p.buf) {
		prefetch.Lines(unsafe.Pointer(&p.buf[p.off]), 128)
	}
}
