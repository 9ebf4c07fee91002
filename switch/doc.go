// Package sw (directory switch/) is the in-network aggregation switch: a
// software model of a programmable switch running an INA program, with a
// P4_16 twin in switch/p4 that runs the same test vectors on BMv2. It
// carries SwitchML, ATP and ESA (slot stages Static, Hashed, Preemptive),
// FreeINA (per-all-reduce leases, the trim and UC data paths, its control
// plane in FreeINANode) and DynaINA (a multi-tenant scheduler of switch
// memory, switch/dynaina, wired behind FreeINA's allocation by
// DynaINANode).
//
// # Data plane
//
// Process runs a batch of frames through a pipeline that mimics P4:
//
//	parse      Ethernet → IPv4 → UDP(4791) → BTH [→ RETH] [→ ImmDt] → INA header → values
//	classify   ina_worker (ingress port, dest QP) → job, worker, rid; ina_job; ina_pool;
//	           non-INA traffic: l2_fwd (dmac), then ipv4_lpm (dst), default drop
//	slot       the job's SlotStage locates the chunk's aggregator and decides the
//	           contribution: one read-modify-write each of the owner, bitmap,
//	           counter, state, priority and exponent arrays at the aggregator head
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
// # Slot stages
//
// The job table's stage id selects a job's SlotStage. Static (SwitchML),
// Hashed (ATP) and Preemptive (ESA) are built in and share one contention
// data path that differs only in Locate and Contend. FreeINA's stage (a
// *FreeINA, registered with RegisterStage) locates chunks through the
// all-reduce's lease and keeps the workers' RC connections to the PS whole
// (trim and forward) or absorbs UC contributions. Every stage reads and
// writes aggregators through the same register helpers.
//
// # Control plane
//
// Tables change only through the control-plane methods (AddWorker, SetJob,
// SetPool, AddMcastGroup, RegisterStage, ...), which the STF runner also
// uses. FreeINA's leases change through its own methods (Alloc, Free,
// Expire), driven by FreeINANode from ALLOC/FREE control frames, or by
// DynaINANode from the DynaINA scheduler's decisions.
//
// Frames handed to Process are rewritten in place; see Frame for the
// verdicts, Egress and EgressUC for multicast replicas. Node adapts a
// Switch to the emulator (emu.Node).
package sw
