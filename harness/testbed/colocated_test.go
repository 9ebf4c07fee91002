package testbed

import (
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// coLocatedSpec is two jobs (3 and 2 workers) whose PSs are on their
// worker rank 0's hosts.
func coLocatedSpec(seed uint64) Spec {
	return Spec{Seed: seed, Jobs: jobSpecs([]int{3, 2}), PSPlacement: PSCoLocated}
}

// linkBetween returns the link between nodes a and b (a at end A).
func linkBetween(t testing.TB, c *Testbed, a, b string) *emu.Link {
	t.Helper()
	for _, l := range c.Net.Links() {
		if x, y := l.Ends(); x.Node == a && y.Node == b {
			return l
		}
	}
	t.Fatalf("no link %s–%s", a, b)
	return nil
}

// TestCoLocated: under every policy, with each job's PS on its worker rank
// 0's host, every result is exact; the switch has a port per worker only,
// the PS is on its worker's port and link, and everything the worker and
// the PS send and receive crosses that one host link.
func TestCoLocated(t *testing.T) {
	elems := 64 * 200
	if raceEnabled {
		elems = 64 * 50
	}
	for _, pol := range allPolicies {
		t.Run(pol, func(t *testing.T) {
			c, end := runExact(t, pol, coLocatedSpec(3), 2, elems, 2*time.Second, nil)
			if _, n := c.Net.Node(SwitchNode); n != 5 {
				t.Errorf("switch has %d ports, want 5 (one per worker)", n)
			}
			for j, ps := range c.PSs {
				w := c.Worker(j, 0)
				if ps.Port != w.Port || ps.Link != w.Link || ps.NIC == nil || ps.NIC != w.NIC {
					t.Fatalf("ps%d: port %d link %p nic %p; worker %s: port %d link %p nic %p", j, ps.Port, ps.Link, ps.NIC, w.Name, w.Port, w.Link, w.NIC)
				}
				nic := NICNode(JobID(j), 0)
				hostLink := linkBetween(t, c, nic, SwitchNode)
				if hostLink != w.Link {
					t.Fatalf("job %d: the worker's Link is not its host's", j)
				}
				psIn, wIn := linkBetween(t, c, nic, ps.Name), linkBetween(t, c, nic, w.Name)
				// Up the host link: all the PS and the worker sent; down
				// it: all they received.
				up := hostLink.Stats(emu.AtoB).SentBytes
				down := hostLink.Stats(emu.BtoA).DeliveredBytes
				psUp, psDown := psIn.Stats(emu.BtoA).DeliveredBytes, psIn.Stats(emu.AtoB).SentBytes
				wUp, wDown := wIn.Stats(emu.BtoA).DeliveredBytes, wIn.Stats(emu.AtoB).SentBytes
				if up != psUp+wUp || down != psDown+wDown || ps.NIC.Unknown != 0 {
					t.Errorf("job %d: host link up %d B, down %d B; PS %d/%d, worker %d/%d; %d unknown", j, up, down, psUp, psDown, wUp, wDown, ps.NIC.Unknown)
				}
				if !c.Idle(ps.Name) && (psUp == 0 || psDown == 0) {
					t.Errorf("job %d: the PS sent %d B and received %d B: no PS traffic on the host link", j, psUp, psDown)
				}
			}
			t.Logf("%s: end %v", pol, end)
		})
	}
}

// TestCoLocatedSpoofed: on a co-located host's port the switch accepts its
// worker's and its PS's addresses, and from any other port a frame
// claiming the PS's address is still dropped as Spoofed, as is one from
// the host claiming another job's PS.
func TestCoLocatedSpoofed(t *testing.T) {
	elems := 64 * 100
	const n = 50
	for _, pol := range []string{"atp", "freeina"} {
		t.Run(pol, func(t *testing.T) {
			c, _ := runExact(t, pol, coLocatedSpec(5), 2, elems, 2*time.Second, func(c *Testbed) {
				m := inahdr.Meta{Job: 1, AllReduce: 1, Chunk: 0, Flags: inahdr.FlagBypass | inahdr.FlagResult | inahdr.FlagFromPS}
				forge := []struct {
					node string
					src  rdma.Endpoint
				}{
					{WorkerNode(1, 1), PSAddr(0)}, // job 0's other worker claims its PS
					{WorkerNode(2, 1), PSAddr(0)}, // another job's worker claims it
					{WorkerNode(1, 0), PSAddr(1)}, // the host claims another job's PS
				}
				for i, f := range forge {
					fr := frame(t, f.src, WorkerAddr(1, 2), rdma.OpUCSendOnly, WorkerUCQPN(1, 2), m, 4)
					for k := range n {
						if err := c.Net.Inject(time.Duration(k+1)*time.Microsecond+time.Duration(i)*100*time.Nanosecond, f.node, 0, fr); err != nil {
							t.Fatal(err)
						}
					}
				}
			})
			if d := c.Drops(); d.Spoofed != 3*n {
				t.Errorf("%d spoofed drops, want %d (drops %+v)", d.Spoofed, 3*n, d)
			}
		})
	}
}

// TestCoLocatedSpec: a co-located spec takes no PS count and no PS link
// rate of its own.
func TestCoLocatedSpec(t *testing.T) {
	none := func(job, rank int) []host.Tensor { return nil }
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Jobs: jobSpecs([]int{2}), PSPlacement: PSCoLocated, PSCount: 2}, "PSCount = 2"},
		{Spec{Jobs: jobSpecs([]int{2}), PSPlacement: PSCoLocated, PSLinkBitsPerSecond: 1e9}, "PSLinkBitsPerSecond = 1000000000"},
	} {
		if _, err := Build(c.spec, "atp", none); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", c.spec, err, c.want)
		}
	}
	if PSCoLocated.String() != "co-located" {
		t.Errorf("String %q", PSCoLocated.String())
	}
}

// TestDedicatedPS: with dedicated PSs (the default) every job's PS has its
// own switch port and link, and under ATP and ESA, whose results all go
// through the PS, each PS link carries its job's traffic both ways and the
// PS sees no frame of another job.
func TestDedicatedPS(t *testing.T) {
	elems := 64 * 100
	for _, pol := range []string{"atp", "esa"} {
		t.Run(pol, func(t *testing.T) {
			c, _ := runExact(t, pol, Spec{Seed: 2, Jobs: jobSpecs([]int{2, 3, 2})}, 2, elems, 2*time.Second, nil)
			if len(c.PSs) != 3 {
				t.Fatalf("%d PSs for 3 jobs", len(c.PSs))
			}
			ports := map[int]bool{}
			for j, ps := range c.PSs {
				if c.PSOf(j) != j || ports[ps.Port] {
					t.Errorf("job %d: PS %d on port %d (taken: %v)", j, c.PSOf(j), ps.Port, ports[ps.Port])
				}
				ports[ps.Port] = true
				l := linkBetween(t, c, SwitchNode, ps.Name)
				if l != ps.Link {
					t.Errorf("ps%d: its Link is not its own switch link", j)
				}
				down, up := l.Stats(emu.AtoB).DeliveredBytes, l.Stats(emu.BtoA).DeliveredBytes
				if down == 0 || up == 0 {
					t.Errorf("ps%d: %d B to it, %d B from it: its job's results did not cross its link", j, down, up)
				}
				if s := c.PSs[j].Node.(interface{ Rx() host.RxStats }).Rx(); s.Stale != 0 {
					t.Errorf("ps%d: %d frames of another job or all-reduce", j, s.Stale)
				}
			}
		})
	}
}
