//go:build !purego

package emu

import "unsafe"

// prefetchPacket asks the CPU to bring p's cache lines in (PREFETCHT0),
// without waiting for them: the scheduler names the packet of the event
// after the one it fires, which is then loaded while this one runs. It
// changes no state; p may be nil.
func prefetchPacket(p *Packet) {
	if p != nil {
		prefetch3(unsafe.Pointer(p))
	}
}

//go:noescape
func prefetch3(p unsafe.Pointer)

// prefetchFrame asks for the first two cache lines of p's frame.
func prefetchFrame(p *Packet) {
	if p.off < len(p.buf) {
		prefetch2(unsafe.Pointer(&p.buf[p.off]))
	}
}

//go:noescape
func prefetch2(p unsafe.Pointer)
