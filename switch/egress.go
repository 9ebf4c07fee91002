package sw

import (
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// AppendMembers appends the members of multicast group g to dst.
func (s *Switch) AppendMembers(dst []McastMember, g uint16) []McastMember {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(g) < len(s.t.members) {
		dst = append(dst, s.t.members[g]...)
	}
	return dst
}

// rewrite returns the egress rewrite of replication id rid, or nil.
func (s *Switch) rewrite(rid uint16) *Rewrite {
	if int(rid) < len(s.t.rewrites) {
		return s.t.rewrites[rid]
	}
	return nil
}

// Egress finishes one replica of an ActMulticast frame for member m: it
// applies the egress rewrite of m.RID (table ina_egress), fixes the IPv4
// checksum and recomputes the ICRC. It allocates nothing.
func (s *Switch) Egress(frame []byte, m McastMember) { s.egress(frame, m, icrcFull) }

// EgressSealed is Egress for a replica whose ICRC is right (the frame's,
// written once for all replicas): the ICRC is updated for the rewritten
// headers only (rdma.HeaderPatch), not recomputed over the payload.
func (s *Switch) EgressSealed(frame []byte, m McastMember) { s.egress(frame, m, icrcPatch) }

// EgressDeferred is Egress without the ICRC: the caller writes it later
// (rdma.SealICRC; emu.Packet.Defer).
func (s *Switch) EgressDeferred(frame []byte, m McastMember) { s.egress(frame, m, icrcDeferred) }

// icrcMode is how an egress leaves a replica's ICRC.
type icrcMode uint8

const (
	icrcFull     icrcMode = iota // recomputed over the frame
	icrcPatch                    // updated for the rewritten headers only
	icrcDeferred                 // left to the caller
)

// finishICRC writes or updates the ICRC of frame, whose headers were
// rewritten after hp saved them, as mode says.
func finishICRC(frame []byte, hp *rdma.HeaderPatch, mode icrcMode) {
	switch mode {
	case icrcFull:
		_ = rdma.SetICRC(frame)
	case icrcPatch:
		_ = hp.Reseal(frame)
	}
}

// replica is a member of a multicast group and its egress rewrite: what
// finishing its replica takes without the switch's lock.
type replica struct {
	m  McastMember
	rw *Rewrite
}

// appendReplicas appends the members of group g, each with its rewrite, to
// dst and counts a frame of n bytes sent on each member's port, all under
// one hold of the lock: the Node's egress of a whole group.
func (s *Switch) appendReplicas(dst []replica, g uint16, n int) []replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(g) < len(s.t.members) {
		for _, m := range s.t.members[g] {
			dst = append(dst, replica{m, s.rewrite(m.RID)})
			s.countTx(m.Port, n)
		}
	}
	return dst
}

// replicaFor is member m with its rewrite, counting a frame of n bytes sent
// on its port.
func (s *Switch) replicaFor(m McastMember, n int) replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countTx(m.Port, n)
	return replica{m, s.rewrite(m.RID)}
}

func (s *Switch) egress(frame []byte, m McastMember, mode icrcMode) {
	s.mu.Lock()
	rw := s.rewrite(m.RID)
	s.countTx(m.Port, len(frame))
	s.mu.Unlock()
	finishReplica(frame, rw, mode)
}

// finishReplica is Egress's work on the frame once its rewrite rw (or nil)
// is known.
func finishReplica(frame []byte, rw *Rewrite, mode icrcMode) {
	var hp rdma.HeaderPatch
	if mode == icrcPatch {
		hp.Save(frame)
	}
	if rw != nil {
		applyRewrite(frame, rw)
	}
	finishICRC(frame, &hp, mode)
}

// EgressUC finishes one replica of an ActForwardMulticast frame for member
// m: the egress rewrite of m.RID (addresses, destination QP), the RC opcode
// turned into its UC twin (SEND Only → UC SEND Only), PSN = chunk &
// 0xFFFFFF (a UC responder accepts an Only packet whatever the PSN gap),
// AckReq cleared, IPv4 checksum and ICRC fixed.
func (s *Switch) EgressUC(frame []byte, m McastMember) { s.egressUC(frame, m, icrcFull) }

// EgressUCSealed is EgressUC for a replica whose ICRC is right: the ICRC
// is updated for the rewritten headers only (rdma.HeaderPatch), not
// recomputed over the payload.
func (s *Switch) EgressUCSealed(frame []byte, m McastMember) { s.egressUC(frame, m, icrcPatch) }

// EgressUCDeferred is EgressUC without the ICRC: the caller writes it
// later (rdma.SealICRC; emu.Packet.Defer).
func (s *Switch) EgressUCDeferred(frame []byte, m McastMember) { s.egressUC(frame, m, icrcDeferred) }

func (s *Switch) egressUC(frame []byte, m McastMember, mode icrcMode) {
	s.mu.Lock()
	rw := s.rewrite(m.RID)
	s.countTx(m.Port, len(frame))
	s.mu.Unlock()
	finishReplicaUC(frame, rw, mode)
}

// finishReplicaUC is EgressUC's work on the frame once its rewrite rw (or
// nil) is known.
func finishReplicaUC(frame []byte, rw *Rewrite, mode icrcMode) {
	if len(frame) < minRoCE {
		return
	}
	var hp rdma.HeaderPatch
	if mode == icrcPatch {
		hp.Save(frame)
	}
	if rw != nil {
		applyRewrite(frame, rw)
	}
	bth := rdma.RoCE(frame).BTH()
	op := bth.Opcode().WithTransport(rdma.TransportUC)
	bth.SetOpcode(op)
	bth.SetAckReq(false)
	if ina := rdma.HeadersLen + op.HeaderLen(); op.IsSendOrWriteOnly() && ina+inahdr.Len <= len(frame) {
		bth.SetPSN(inahdr.Header(frame[ina:]).Chunk() & 0xFFFFFF)
	}
	finishICRC(frame, &hp, mode)
}
