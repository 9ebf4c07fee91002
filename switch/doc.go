// Package sw (directory switch/) is the in-network aggregation switch: a
// software model of a programmable switch running an INA program (ATP,
// SwitchML, ESA), with a P4_16 twin in switch/p4 that runs the same test
// vectors on BMv2.
//
// # Data plane
//
// Process runs a batch of frames through a pipeline that mimics P4:
//
//	parse      Ethernet → IPv4 → UDP(4791) → BTH [→ RETH] [→ ImmDt] → INA header → values
//	classify   ina_worker (ingress port, dest QP) → job, worker, rid; ina_job; ina_pool;
//	           non-INA traffic: l2_fwd (dmac), then ipv4_lpm (dst), default drop
//	locate     the job's Policy maps (job, all-reduce, chunk) to an aggregator
//	slot meta  one read-modify-write each of the owner, bitmap, counter,
//	           state, priority and exponent arrays at the aggregator head
//	values     pass k adds values [kV, (k+1)V) into slot head+k; V values per
//	           pass (64 by default); more values take recirculation passes,
//	           which are counted and charged to pipeline capacity
//	deparse    flags, bitmap and result into the packet; IPv4 checksum; ICRC
//
// Each stage runs over the whole batch before the next starts; within a
// stage packets are handled in arrival order, so the result equals running
// packets one at a time. Nothing allocates per packet.
//
// Register arrays follow the hardware's rules: each array is accessed once
// per packet pass (one RegisterAction), values saturate (int32) and set a
// per-aggregator overflow flag, and memory is a fixed number of slots of V
// values (Tofino-1: up to 16K slots of 64 values per pipe).
//
// # Control plane
//
// Tables change only through the control-plane methods (AddWorker, SetJob,
// SetPool, AddMcastGroup, ...), which the STF runner also uses. Allocation is
// delegated to a Policy per job: Static (SwitchML), Hashed (ATP) and
// Preemptive (ESA) are built in; others register with RegisterPolicy.
//
// Frames handed to Process are rewritten in place; see Frame for the
// verdicts and Egress for multicast replicas. Node adapts a Switch to the
// emulator (emu.Node).
package sw
