// Package host implements FreeINA's end hosts: the Worker (quantization,
// chunking, windows, the two paths, result recovery) and the parameter
// server PS (exactly-once aggregation over RC, fallback to software sums,
// result service, switch memory allocation per all-reduce). Both are
// deterministic emu.Nodes. The protocol and its control law are described
// in docs/freeina.md.
package host

import (
	"encoding/binary"

	"github.com/inabox/inabox/rdma"
	sw "github.com/inabox/inabox/switch"
	"github.com/inabox/inabox/switch/inahdr"
)

// Host-level control opcodes (INA header worker byte of a
// FlagCtl|FlagBypass message on a worker↔PS RC connection).
const (
	// OpBegin (worker → PS): an all-reduce starts. Bitmap = chunks,
	// Slot = aggregators wanted.
	OpBegin = sw.CtlHost + iota
	// OpPlan (PS → worker): the path partition. Slot = INA aggregators,
	// Chunk = PS chunks per round, Bitmap = chunks.
	OpPlan
	// OpFetch (worker → PS): send me chunk Chunk's result when you have it.
	OpFetch
	// OpPull (PS → worker): resend chunk Chunk raw (FlagBypass): the switch
	// lost the partial aggregate your contribution went into.
	OpPull
	// OpDone (worker → PS): I hold every result of the all-reduce (RC order
	// also proves every contribution of mine was delivered).
	OpDone
)

// Wire flags used by hosts.
const (
	flagCtlMsg = sw.FlagCtl | inahdr.FlagBypass
	// flagResultPS marks a result sent by the PS over RC.
	flagResultPS = inahdr.FlagFromPS | inahdr.FlagResult | inahdr.FlagBypass
)

// ctlMsg builds a control message payload.
func ctlMsg(op uint8, job, ar uint16, chunk uint32, slot uint16, bitmap uint32) []byte {
	b := make([]byte, inahdr.Len)
	inahdr.Header(b).Encode(inahdr.Meta{Flags: flagCtlMsg, Job: job, AllReduce: ar, Chunk: chunk,
		Worker: op, Slot: slot, Bitmap: bitmap})
	return b
}

// ucPayload returns the payload of a UC SEND Only frame addressed to qpn
// (the result and GRANT frames the switch multicasts), or nil.
func ucPayload(b []byte, qpn uint32) []byte {
	const bth = rdma.HeadersLen
	if len(b) < bth+rdma.BTHLen+rdma.ICRCLen || b[bth] != 0x24 || rdma.BTH(b[bth:]).DestQP() != qpn {
		return nil
	}
	if !rdma.CheckICRC(b) {
		return nil
	}
	ulen := int(binary.BigEndian.Uint16(b[rdma.EthLen+rdma.IPv4Len+4:]))
	end := rdma.EthLen + rdma.IPv4Len + ulen - rdma.ICRCLen - rdma.BTH(b[bth:]).PadCount()
	if end < bth+rdma.BTHLen || end > len(b) {
		return nil
	}
	return b[bth+rdma.BTHLen : end]
}

// destQP returns the BTH destination QP of a RoCEv2 frame, or 0.
func destQP(b []byte) uint32 {
	if len(b) < rdma.HeadersLen+rdma.BTHLen {
		return 0
	}
	return rdma.BTH(b[rdma.HeadersLen:]).DestQP()
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
