// Package sw (directory switch/) is the in-network aggregation switch: a
// software model of a programmable switch running an INA program, with a
// P4_16 twin in switch/p4 that runs the same test vectors on BMv2. It
// carries SwitchML, ATP and ESA (slot stages Static, Hashed, Preemptive),
// FreeINA (per-all-reduce leases, the trim and UC data paths, its control
// plane FreeINAControl) and DynaINA (a multi-tenant scheduler of switch
// memory, switch/dynaina, deciding FreeINA's leases in the control plane
// DynaINAControl).
//
// # Data plane
//
// Process runs a batch of frames through a pipeline that mimics P4:
//
//	parse      Ethernet → IPv4 → UDP(4791) → BTH [→ RETH] [→ ImmDt] → INA header → values
//	           (rdma's header views: RoCE.Payload, Opcode.IsSendOrWriteOnly)
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
// The result is that of each stage running over the whole batch before the
// next starts, packets in arrival order within a stage, which equals
// running packets one at a time (Process takes parse to slot, then values
// and deparse, frame by frame in two passes). Nothing allocates per packet.
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
// uses. FreeINA's leases change through the lease table's methods (Alloc,
// AllocExact, Install, Renew, Free, Expire, Reset).
//
// # The switch node
//
// Node runs a Switch in the emulator (emu.Node): frames handed to Process
// are rewritten in place (see Frame for the verdicts, Egress and EgressUC
// for multicast replicas), and NodeConfig times the pipeline. A node has
// at most one ControlPlane, chosen per policy: none for the ring, ATP and
// ESA, SwitchMLControl for SwitchML (its controller: a pool per job for
// the job's lifetime, divided among the jobs present; JOIN → GRANT,
// LEAVE → LEFT), FreeINA has FreeINAControl (ALLOC → first-fit lease → GRANT; FREE;
// idle-lease expiry), DynaINA has DynaINAControl (the scheduler decides
// each ALLOC and installs its lease in the same lease table). The node
// recognises control frames for the switch (RC or UC SEND Only to its
// control QP), checks their ICRC (a bad one is counted in NodeStats and
// dropped), decodes them (inahdr.DecodeCtl) and hands them to the control
// plane; every other frame goes through the pipeline. The control plane
// answers through CtlEnv: the time, timers in its own key space, and
// SendJob, which sends a control message (a GRANT) as UC SEND Only to a
// job's group and its PS, and SendGroup (a group only). Jobs reach DynaINA's scheduler only through
// registrations (DynaINAControl.Register), which the cluster manager (the
// testbed) delivers at each job's arrival. A crash and restart (Reset)
// reboots the switch the same way under every policy: every register is
// lost, and so is what the control plane keeps in the data plane (leases).
package sw
