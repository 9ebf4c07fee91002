// Package host implements FreeINA's end hosts: the Worker (windows, the
// two paths, result recovery) and the parameter server PS (exactly-once
// aggregation over RC, fallback to software sums, result service, switch
// memory allocation per all-reduce), both deterministic emu.Nodes; and the
// worker core Core (tensors, quantization, chunk encoding, results,
// reports) that Worker and every baseline client (host/baseline) embed.
// Every address and QP number comes in through the configuration
// (harness/testbed's plan). The protocol and its control law are described
// in docs/freeina.md.
package host

import (
	"encoding/binary"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// flagResultPS marks a result sent by the PS over RC.
const flagResultPS = inahdr.FlagFromPS | inahdr.FlagResult | inahdr.FlagBypass

// ctl encodes control message c (the INA protocol's, package inahdr) as an
// RC message payload.
func ctl(c inahdr.Ctl) []byte { return c.Append(make([]byte, 0, inahdr.Len)) }

// destQP returns the BTH destination QP of a RoCEv2 frame, or 0.
func destQP(b []byte) uint32 {
	if len(b) < rdma.HeadersLen+rdma.BTHLen {
		return 0
	}
	return rdma.RoCE(b).BTH().DestQP()
}

// SatAdd adds src (big-endian int32 values) into dst with int32
// saturation, like the switch; it reports whether anything clipped.
func SatAdd(dst []int32, src []byte) bool {
	ovf := false
	for i := range dst {
		s := int64(dst[i]) + int64(int32(binary.BigEndian.Uint32(src[4*i:])))
		switch {
		case s > 1<<31-1:
			s, ovf = 1<<31-1, true
		case s < -1<<31:
			s, ovf = -1<<31, true
		}
		dst[i] = int32(s)
	}
	return ovf
}
