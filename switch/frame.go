package sw

import "github.com/inabox/inabox/rdma"

// Action is a frame's verdict: the pipeline decides it (the slot stage for
// INA packets, the forwarding tables for the rest) and reports it in
// Frame.Action.
type Action uint8

const (
	// ActDrop: the frame is consumed (absorbed or dropped).
	ActDrop Action = iota
	// ActForward: send the frame on OutPort.
	ActForward
	// ActMulticast: replicate the frame to every member of Group; call
	// Egress on each replica before sending it.
	ActMulticast
	// ActForwardMulticast (FreeINA): send the frame on OutPort (to the PS,
	// over its RC connection) and also replicate it to every member of
	// Group; call EgressUC on each replica (it becomes a UC SEND Only).
	ActForwardMulticast
)

// Frame is one packet handed to Process: Data, InPort and Sealed are
// inputs, the rest is the verdict. Data is rewritten in place (same length).
type Frame struct {
	Data   []byte
	InPort int
	// Sealed, on input, says Data's ICRC is known to be right (the
	// emulator's emu.Packet.Sealed): the pipeline does not recompute it.
	// On output it says whether it still is: the pipeline clears it when
	// it rewrote the frame without writing its ICRC (ActMulticast: Egress
	// does, per replica) and sets it when it wrote one.
	Sealed bool
	// DeferICRC, on input, says the caller writes the ICRC of a frame
	// where it is seen (emu.Packet.Defer, in virtual time): the pipeline
	// then writes none, and on output Deferred says which frames it
	// rewrote and left so (Sealed is then false). The caller hands every
	// frame in with Deferred false.
	DeferICRC bool
	Deferred  bool

	Action  Action
	OutPort int
	Group   uint16
	Reason  Reason
	// Passes is how many pipeline passes the frame used (1 + its
	// recirculations); the emulator adapter charges pipeline time for each.
	Passes int
	// Len, if not zero, is the frame's new length: a FreeINA frame trimmed
	// to its INA header (Data is then Data[:Len]).
	Len int
}

// minRoCE is the shortest frame the pipeline reads transport fields of:
// Ethernet, IPv4, UDP and a BTH.
const minRoCE = rdma.HeadersLen + rdma.BTHLen
