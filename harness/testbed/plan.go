package testbed

import (
	"fmt"
	"net/netip"

	"github.com/inabox/inabox/rdma"
)

// The testbed's naming and numbering plan, in one place: node names,
// addresses, queue-pair numbers and replication ids. Every endpoint gets
// its own and its peers' from here through its configuration; no endpoint
// derives an address itself.

// SwitchNode is the emulator node name of the switch.
const SwitchNode = "switch"

// WorkerNode is the emulator node name of worker rank of job (job from 1):
// "w1.0", "w1.1", ….
func WorkerNode(job uint16, rank int) string { return fmt.Sprintf("w%d.%d", job, rank) }

// PSNode is the emulator node name of parameter server i: "ps", "ps1", ….
func PSNode(i int) string {
	if i == 0 {
		return "ps"
	}
	return fmt.Sprintf("ps%d", i)
}

// NICNode is the emulator node name of the NIC of the host of worker rank
// of job (job from 1) when the job's PS shares it (PSCoLocated):
// "nic1.0", ….
func NICNode(job uint16, rank int) string { return fmt.Sprintf("nic%d.%d", job, rank) }

// Addresses.
var (
	// SwitchAddr is the switch's own address: the source of the results and
	// GRANTs it originates and the destination of control frames.
	SwitchAddr = rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0xFE, 1}, IP: netip.AddrFrom4([4]byte{10, 255, 0, 1})}
)

// PSAddr is the address of parameter server i.
func PSAddr(i int) rdma.Endpoint {
	return rdma.Endpoint{MAC: [6]byte{2, 0, 0, 0, 0xFE, byte(2 + i)}, IP: netip.AddrFrom4([4]byte{10, 255, 0, byte(2 + i)})}
}

// WorkerAddr is the address of worker rank of job.
func WorkerAddr(job uint16, rank int) rdma.Endpoint {
	return rdma.Endpoint{MAC: [6]byte{2, 0, byte(job >> 8), byte(job), byte(rank), 1},
		IP: netip.AddrFrom4([4]byte{10, byte(job), byte(rank), 1})}
}

// Queue-pair numbers. Each is 0xT00000 | job<<8 | rank, T naming the role.
func qpn(role uint32, job uint16, rank int) uint32 {
	return role<<20 | uint32(job&0xFFF)<<8 | uint32(rank)
}

// PSQPN is the PS's RC QP for worker rank of job; the INA baselines also
// address their UC contributions to it (the switch's ina_worker key).
func PSQPN(job uint16, rank int) uint32 { return qpn(1, job, rank) }

// WorkerQPN is worker rank of job's RC QP (to the PS).
func WorkerQPN(job uint16, rank int) uint32 { return qpn(2, job, rank) }

// WorkerUCQPN is worker rank of job's UC QP: the destination of the
// results the switch sends it.
func WorkerUCQPN(job uint16, rank int) uint32 { return qpn(3, job, rank) }

// PSCtlQPN is the FreeINA PS's UC QP for GRANT frames from the switch.
const PSCtlQPN = 0x400000

// SwitchCtlQPN is the switch control plane's QP: the destination QP of the
// control frames (ALLOC, FREE) the PSs send it.
const SwitchCtlQPN = 0xC7C7C7

// PSUCQPN is the FreeINA PS's UC QP for worker rank of job: the
// destination QP of the worker's UC contributions (the switch's
// ina_worker key; the PS sees those the switch forwards raw).
func PSUCQPN(job uint16, rank int) uint32 { return qpn(5, job, rank) }

// PSAckQPN is the QP number of the ATP/ESA PS's ACK frames for job: the
// switch's ina_worker entry on the PS port marks them as the job's PS.
func PSAckQPN(job uint16) uint32 { return 5<<20 | uint32(job&0xFFF) }

// RingRightQPN and RingLeftQPN are ring worker rank's QPs towards its
// right neighbour (it sends on it) and its left neighbour (it receives).
func RingRightQPN(job uint16, rank int) uint32 { return qpn(6, job, rank) }
func RingLeftQPN(job uint16, rank int) uint32  { return qpn(7, job, rank) }

// WorkerRID is the replication id (egress rewrite) of worker rank of job;
// PSRID the job's PS's.
func WorkerRID(job uint16, rank int) uint16 { return job<<8 | uint16(rank) }
func PSRID(job uint16) uint16               { return job<<8 | 0xFF }
