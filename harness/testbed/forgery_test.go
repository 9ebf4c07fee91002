package testbed

import (
	"fmt"
	"testing"
	"time"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// The isolation tests: job 0 (4 workers) is the victim, job 1 (2 workers)
// the attacker's, whose worker w2.0 sends forged frames from its own port
// while both jobs run. Each forgery class runs under every policy it
// applies to; the victim's (and the attacker's own) sums must stay exact,
// the victim's job must not finish later than maxSlowdown × its clean
// time, and every forged frame must be counted where it was dropped.

const (
	forgeries   = 200  // forged frames per class and run
	maxSlowdown = 1.05 // victim JCT with forgeries ÷ clean
	forgeARs    = 4    // all-reduces per worker
	forgeElems  = 64 * 400
)

// forged is one frame a node sends at a time.
type forged struct {
	at    time.Duration
	node  string
	frame []byte
}

// frame builds an Ethernet/IPv4/UDP/BTH frame of opcode op from src to dst
// on destQP carrying an INA header m and n values.
func frame(t testing.TB, src, dst rdma.Endpoint, op rdma.Opcode, destQP uint32, m inahdr.Meta, n int) []byte {
	t.Helper()
	vals := make([]int32, n)
	for i := range vals {
		vals[i] = 1 << 20 // a wrong sum would show
	}
	payload := inahdr.Append(nil, m, vals)
	fh := rdma.FrameHeader{Src: src, Dst: dst, Opcode: op, DestQP: destQP, SrcPort: rdma.SourcePort(destQP), TTL: 64}
	b := make([]byte, fh.Len(len(payload)))
	if _, err := fh.Encode(b, payload); err != nil {
		t.Fatal(err)
	}
	return b
}

// ctlFrame builds a control message frame from src to dst's destQP.
func ctlFrame(t testing.TB, src, dst rdma.Endpoint, destQP uint32, c inahdr.Ctl) []byte {
	t.Helper()
	fh := rdma.FrameHeader{Src: src, Dst: dst, Opcode: rdma.OpUCSendOnly, DestQP: destQP, SrcPort: rdma.SourcePort(destQP), TTL: 64}
	payload := c.Append(nil)
	b := make([]byte, fh.Len(len(payload)))
	if _, err := fh.Encode(b, payload); err != nil {
		t.Fatal(err)
	}
	return b
}

// schedule is when the clean run's all-reduces started: victim[k] for the
// victim's all-reduce k, attacker[k] for the attacker's.
type schedule struct{ victim, attacker []time.Duration }

// forgery is one class of forged frames.
type forgery struct {
	name string
	// applies says which policies the class concerns (nil: every one).
	applies func(policy string) bool
	// frames returns the forged frames of a run with clean schedule s.
	frames func(t testing.TB, policy string, c *Testbed, s schedule) []forged
	// counted returns how many forged frames were dropped and counted in
	// the class's own cause.
	counted func(c *Testbed) uint64
}

func inaPolicy(p string) bool   { return p != "none" && p != "ps" }
func leasePolicy(p string) bool { return p == "freeina" || p == "dynaina" }

// attacker is job 1's worker 0; victim(r) is job 0's worker r.
var (
	attackerNode = WorkerNode(2, 0)
	attackerAddr = WorkerAddr(2, 0)
)

// during makes one forged frame (f(i, at)) at each of the forgeries times
// spread over the victim's all-reduces of schedule s.
func during(s schedule, f func(i int, at time.Duration) forged) []forged {
	out := make([]forged, 0, forgeries)
	for i, at := range spread(s.victim[0], s.victim[forgeARs-1]) {
		out = append(out, f(i, at))
	}
	return out
}

// spread returns forgeries times across [from, to).
func spread(from, to time.Duration) []time.Duration {
	out := make([]time.Duration, forgeries)
	for i := range out {
		out[i] = from + (to-from)*time.Duration(i)/forgeries
	}
	return out
}

// attackerUCQP is the destination QP of the attacker's own contributions.
func attackerUCQP(policy string) uint32 {
	if leasePolicy(policy) {
		return PSUCQPN(2, 0)
	}
	return PSQPN(2, 0)
}

// victimUCQP is the destination QP of victim worker r's contributions.
func victimUCQP(policy string, r int) uint32 {
	if leasePolicy(policy) {
		return PSUCQPN(1, r)
	}
	return PSQPN(1, r)
}

func forgeryClasses() []forgery {
	return []forgery{{
		// A result for the victim's current all-reduce, addressed to a
		// victim worker's UC QP, as a host-to-host message (FlagBypass):
		// only the job's PS port may send results.
		name: "result-bypass", applies: inaPolicy,
		frames: func(t testing.TB, pol string, c *Testbed, s schedule) []forged {
			return during(s, func(i int, at time.Duration) forged {
				r := i % 4
				m := inahdr.Meta{Flags: inahdr.FlagResult | inahdr.FlagBypass, Job: 1, AllReduce: uint16(1 + i%forgeARs), Chunk: uint32(i % 300), Bitmap: 0xF}
				return forged{at, attackerNode, frame(t, attackerAddr, WorkerAddr(1, r), rdma.OpUCSendOnly, WorkerUCQPN(1, r), m, 64)}
			})
		},
		counted: func(c *Testbed) uint64 { return c.Drops().ForgedResult },
	}, {
		// The same result on the INA path (no FlagBypass): the attacker's
		// port has no ina_worker entry for the victim's QP.
		name: "result-ina", applies: inaPolicy,
		frames: func(t testing.TB, pol string, c *Testbed, s schedule) []forged {
			return during(s, func(i int, at time.Duration) forged {
				r := i % 4
				m := inahdr.Meta{Flags: inahdr.FlagResult, Job: 1, AllReduce: uint16(1 + i%forgeARs), Chunk: uint32(i % 300), Worker: uint8(r), Bitmap: 1 << r}
				return forged{at, attackerNode, frame(t, attackerAddr, WorkerAddr(1, r), rdma.OpUCSendOnly, WorkerUCQPN(1, r), m, 64)}
			})
		},
		counted: func(c *Testbed) uint64 { return c.Drops().Foreign },
	}, {
		// Contributions as a victim worker: its source addresses and QP
		// from the attacker's port (port security).
		name: "spoofed-source", applies: inaPolicy,
		frames: func(t testing.TB, pol string, c *Testbed, s schedule) []forged {
			return during(s, func(i int, at time.Duration) forged {
				r := i % 4
				m := inahdr.Meta{Job: 1, AllReduce: uint16(1 + i%forgeARs), Chunk: uint32(i % 300), Worker: uint8(r), Bitmap: 1 << r}
				return forged{at, attackerNode, frame(t, WorkerAddr(1, r), PSAddr(c.PSOf(0)), rdma.OpUCSendOnly, victimUCQP(pol, r), m, 64)}
			})
		},
		counted: func(c *Testbed) uint64 { return c.Drops().Spoofed },
	}, {
		// Contributions with a victim worker's QP from the attacker's own
		// addresses: the (port, QP) entry belongs to another port.
		name: "foreign-qp", applies: inaPolicy,
		frames: func(t testing.TB, pol string, c *Testbed, s schedule) []forged {
			return during(s, func(i int, at time.Duration) forged {
				r := i % 4
				m := inahdr.Meta{Job: 1, AllReduce: uint16(1 + i%forgeARs), Chunk: uint32(i % 300), Worker: uint8(r), Bitmap: 1 << r}
				return forged{at, attackerNode, frame(t, attackerAddr, PSAddr(c.PSOf(0)), rdma.OpUCSendOnly, victimUCQP(pol, r), m, 64)}
			})
		},
		counted: func(c *Testbed) uint64 { return c.Drops().Foreign },
	}, {
		// ALLOC and FREE for the victim's job, and ALLOCs for a job that
		// does not exist, to the switch's control QP from the attacker's
		// port: only the job's PS port may send them.
		name: "alloc-free", applies: leasePolicy,
		frames: func(t testing.TB, pol string, c *Testbed, s schedule) []forged {
			return during(s, func(i int, at time.Duration) forged {
				m := inahdr.Ctl{Op: inahdr.CtlFree, Job: 1, AllReduce: uint16(1 + i%forgeARs)}
				switch i % 3 {
				case 1:
					m = inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 1, AllReduce: uint16(1 + i%forgeARs), Want: 1000, Chunks: 1000}
				case 2:
					m = inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 99, AllReduce: uint16(i), Want: 1000, Chunks: 1000}
				}
				return forged{at, attackerNode, ctlFrame(t, attackerAddr, SwitchAddr, SwitchCtlQPN, m)}
			})
		},
		counted: func(c *Testbed) uint64 { return c.Drops().ForgedControl },
	}, {
		// GRANTs to the victim's PS and workers: only the switch sends them.
		name: "grant", applies: inaPolicy,
		frames: func(t testing.TB, pol string, c *Testbed, s schedule) []forged {
			return during(s, func(i int, at time.Duration) forged {
				m := inahdr.Ctl{Op: inahdr.CtlGrant, Job: 1, AllReduce: uint16(1 + i%forgeARs), Slots: 0, Chunks: 300}
				dst, qp := PSAddr(c.PSOf(0)), uint32(PSCtlQPN)
				if i%2 == 1 {
					dst, qp = WorkerAddr(1, i%4), WorkerUCQPN(1, i%4)
				}
				return forged{at, attackerNode, ctlFrame(t, attackerAddr, dst, qp, m)}
			})
		},
		counted: func(c *Testbed) uint64 { return c.Drops().ForgedControl },
	}, {
		// A replay of the victim's first all-reduce from the victim's own
		// port (a late duplicate, a misbehaving NIC) while it runs its
		// third: outside the job's window, refused before any aggregator
		// (or, where its all-reduces take the PS path and the switch sees
		// no contribution, by the PS as stale).
		name: "replay", applies: inaPolicy,
		frames: func(t testing.TB, pol string, c *Testbed, s schedule) []forged {
			start := s.victim
			var out []forged
			for i, at := range spread(start[2]+(start[3]-start[2])/2, start[3]) {
				r := i % 4
				// (SwitchML numbers chunks across all-reduces: the first
				// all-reduce's are 0, 1, …, as the others')
				m := inahdr.Meta{Job: 1, AllReduce: 1, Chunk: uint32(i % 300), Worker: uint8(r), Bitmap: 1 << r}
				out = append(out, forged{at, WorkerNode(1, r), frame(t, WorkerAddr(1, r), PSAddr(c.PSOf(0)), rdma.OpUCSendOnly, victimUCQP(pol, r), m, 64)})
			}
			return out
		},
		counted: func(c *Testbed) uint64 { return c.Drops().Stale },
	}, {
		// Malformed contributions of the attacker's own job: a bitmap with
		// another worker's bit too, a bitmap of another worker, a Count
		// larger than the payload.
		name: "malformed", applies: inaPolicy,
		frames: func(t testing.TB, pol string, c *Testbed, s schedule) []forged {
			return during(s, func(i int, at time.Duration) forged {
				m := inahdr.Meta{Job: 2, AllReduce: uint16(1 + i%forgeARs), Chunk: uint32(i % 300), Worker: 0, Bitmap: 1}
				switch i % 3 {
				case 0:
					m.Bitmap = 3
				case 2:
					m.Bitmap = 2
				}
				f := frame(t, attackerAddr, PSAddr(c.PSOf(1)), rdma.OpUCSendOnly, attackerUCQP(pol), m, 64)
				if i%3 == 1 { // a valid frame whose header claims more values than it carries
					inahdr.Header(f[rdma.HeadersLen+rdma.BTHLen:]).SetCount(500)
					_ = rdma.SetICRC(f)
				}
				return forged{at, attackerNode, f}
			})
		},
		counted: func(c *Testbed) uint64 { return c.Drops().Malformed },
	}, {
		// Contributions of the attacker's own job to chunks beyond its
		// all-reduce (a lease covers chunks [0, Chunks); a chunk beyond
		// would alias a real chunk's aggregator). Only leases have a
		// range: the static and hashed policies map every chunk into the
		// job's slots or the shared table by design.
		name: "out-of-range", applies: leasePolicy,
		frames: func(t testing.TB, pol string, c *Testbed, s schedule) []forged {
			// In the middle half of the attacker's all-reduce k, to
			// all-reduce k: under the current lease.
			start := s.attacker
			var out []forged
			for i := range forgeries {
				k := i % (forgeARs - 1)
				at := start[k] + (start[k+1]-start[k])*time.Duration(forgeries+2*i)/(4*forgeries)
				m := inahdr.Meta{Job: 2, AllReduce: uint16(1 + k), Chunk: 1<<20 + uint32(i), Worker: 0, Bitmap: 1}
				out = append(out, forged{at, attackerNode, frame(t, attackerAddr, PSAddr(c.PSOf(1)), rdma.OpUCSendOnly, attackerUCQP(pol), m, 64)})
			}
			return out
		},
		counted: func(c *Testbed) uint64 { return c.Drops().Malformed },
	}}
}

// TestForgery runs every forgery class under every policy it applies to.
func TestForgery(t *testing.T) {
	fullSizeWithoutRace(t)
	t.Parallel() // a long test: it shares the cores with the others (make test)
	elems := forgeElems
	spec := func(pol string) Spec { return Spec{Seed: 11, Jobs: jobSpecs([]int{4, 2})} }
	for _, pol := range allPolicies {
		clean, cleanEnd := runExact(t, pol, spec(pol), forgeARs, elems, 2*time.Second, nil)
		var sched schedule
		for _, r := range clean.Workers[0][0].Endpoint.Reports() {
			sched.victim = append(sched.victim, r.Start)
		}
		for _, r := range clean.Workers[1][0].Endpoint.Reports() {
			sched.attacker = append(sched.attacker, r.Start)
		}
		victimClean := clean.JobEnd(0)
		for _, fc := range forgeryClasses() {
			if fc.applies != nil && !fc.applies(pol) {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", pol, fc.name), func(t *testing.T) {
				c, end := runExact(t, pol, spec(pol), forgeARs, elems, 2*time.Second, func(c *Testbed) {
					for _, f := range fc.frames(t, pol, c, sched) {
						if err := c.Net.Inject(f.at, f.node, 0, f.frame); err != nil {
							t.Fatal(err)
						}
					}
				})
				if got := fc.counted(c); got < forgeries {
					t.Errorf("%d of %d forged frames counted (drops %+v)", got, forgeries, c.Drops())
				}
				if v := c.JobEnd(0); float64(v) > maxSlowdown*float64(victimClean) {
					t.Errorf("victim finished at %v, clean %v: %.3f× > %.2f×", v, victimClean, float64(v)/float64(victimClean), maxSlowdown)
				}
				t.Logf("end %v (clean %v), victim %v (clean %v), drops %+v", end, cleanEnd, c.JobEnd(0), victimClean, c.Drops())
			})
		}
	}
}
