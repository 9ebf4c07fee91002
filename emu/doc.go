// Package emu is a packet-level network emulator: nodes joined by links,
// and one model of them driven either in deterministic virtual time or in
// real time against the wall clock.
//
// A node is a sans-IO state machine, a [Node]: Start(env), Receive(env,
// port, pkts) and Timer(env, key). It answers through its [Env] — Send a
// packet out of a port, Free one it drops, SetTimer or StopTimer — and
// takes time and chance only from Env.Now and Env.Rand; it never reads a
// clock, sleeps or starts goroutines. A [Packet] is an Ethernet frame in a
// pooled buffer with headroom, owned by one holder at a time.
//
// A [Network] is built, then run once: AddNode, Connect (or ConnectAsym) with
// a [LinkConfig] per direction — rate with exact nanosecond serialization,
// propagation delay, jitter, MTU, a drop-tail queue in packets and bytes,
// ECN marking, and [Impairments] (Bernoulli and Gilbert–Elliott loss,
// duplication, reordering, corruption) — and Capture to write a port's
// frames to a pcap file. The drivers share one event queue ordered by time,
// then scheduling order:
//
//   - Run and RunUntil step virtual time: a run is a function of its
//     configuration and [Config].Seed (each link direction and each node has
//     its own generator, seeded from the seed and its name), at any link
//     speed and independent of the machine. [Network.Interrupt], from any
//     goroutine, stops it after the current event (Ctrl-C).
//   - RunRealtime paces the same events on the wall clock. Attach joins a
//     node's port to a backend [Port] — an in-memory pipe ([NewMemPipe]), a
//     UDP socket ([NewUDPPort], recvmmsg/sendmmsg) or a TAP device
//     ([NewTAPPort]); [ParsePortSpec] and [OpenPort] name and open them — read
//     and written in batches by goroutines at the edges, while nodes still run
//     one at a time. [RealtimeStats] says how late events ran.
//
// Faults are scheduled at run times on the built network: LinkDown and
// LinkUp, LossBurst, CorruptWindow, DelaySpike, Crash and Restart of a node
// (a node implementing [Resetter] loses its state), and anything else
// through At. A configuration that makes no sense fails at construction with
// a [*ConfigError] naming the field and value.
//
// Ready-made nodes (a traffic generator and checker, a learning switch) are
// in emu/nodes; docs/emulator.md has the link model and its measured cost.
package emu
