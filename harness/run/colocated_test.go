package run

import (
	"strings"
	"testing"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
)

// coLocatedTiny is the tiny scenario with each job's PS on its worker rank
// 0's host, a loss burst on h0 (job vgg's rank 0 and its PS), a link flap
// on ps1 (job resnet's rank 0's host link) and light loss everywhere.
func coLocatedTiny(t *testing.T) *scenario.Scenario {
	t.Helper()
	src := strings.Replace(tinyScenario, "ps: {placement: shared, count: 2}", "ps: {placement: co-located}", 1) + `impairments:
  - {link: all, loss: 0.001}
faults:
  - {at: 2ms, kind: loss_burst, target: h0, duration: 2ms, value: 0.2}
  - {at: 22ms, kind: link_down, target: ps1, duration: 1ms}
`
	s, err := scenario.Parse("tiny.yaml", []byte(src), scenario.DefaultModels())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRunCoLocated: every policy finishes a co-located scenario with link
// faults on the shared host links, every sum exact (the runner checks);
// the PS's link is its worker host's, named by both, and a crash of the
// host takes the PS with it.
func TestRunCoLocated(t *testing.T) {
	s := coLocatedTiny(t)
	for _, p := range testbed.Names() {
		r, _ := runJSON(t, s, Options{Policy: p})
		if r.Summary.JobsFinished != 2 || len(r.Faults) != 2 {
			t.Fatalf("%s: %+v, faults %+v", p, r.Summary, r.Faults)
		}
	}
	pr, err := prepare(s, Options{Policy: "atp"}, false)
	if err != nil {
		t.Fatal(err)
	}
	plans := pr.plans
	for j, p := range plans {
		ps := pr.tb.PSs[j]
		h := p.Hosts[0]
		if l := pr.hostLinks[p.PS]; len(l) != 1 || l[0] != pr.hostLinks[h][0] || l[0] != pr.tb.Worker(j, 0).Link {
			t.Errorf("job %d: %s's links %v, host %s's %v", j, p.PS, l, h, pr.hostLinks[h])
		}
		if nodes := pr.hostNodes[h]; len(nodes) != 2 || nodes[1] != ps.Name {
			t.Errorf("job %d: host %s's nodes %v, want its worker and %s", j, h, nodes, ps.Name)
		}
	}
}

// TestPreparePeersCoLocated: with co-located PSs the peers are the workers
// alone, one per switch port; job j's rank 0 carries its host: the NIC on
// the switch link and, behind NIC ports 1 and 2, the worker and the PS
// (Inside), over ideal links. No other peer has any.
func TestPreparePeersCoLocated(t *testing.T) {
	s := coLocatedTiny(t)
	for _, policy := range testbed.Names() {
		p, peers := preparePeers(t, s, policy)
		coloc := 0
		for i, pe := range peers {
			if pe.Role != "worker" || pe.SwitchPort != i {
				t.Fatalf("%s: peer %d: %+v", policy, i, pe)
			}
			c := pe.CoLocated
			if pe.Rank != 0 {
				if c != nil || p.Inside(pe) != nil {
					t.Errorf("%s: %s is not co-located: %+v", policy, pe.Node, c)
				}
				continue
			}
			coloc++
			if c == nil || c.NIC != testbed.NICNode(testbed.JobID(pe.Job), 0) || c.PS != testbed.PSNode(pe.Job) ||
				c.PSIndex != pe.Job || c.PSLink != "ps"+string(rune('0'+pe.Job)) {
				t.Fatalf("%s: %s: %+v", policy, pe.Node, c)
			}
			in := p.Inside(pe)
			if len(in) != 2 || in[0].Node != pe.Node || in[0].NICPort != 1 || in[1].Node != c.PS || in[1].NICPort != 2 ||
				in[0].Link.BitsPerSecond != 0 || in[0].Link.Delay != 0 {
				t.Errorf("%s: %s's host: %+v", policy, pe.Node, in)
			}
		}
		workers := 0
		for _, pl := range p.Plans() {
			workers += pl.Workers
		}
		if coloc != 2 || len(peers) != workers {
			t.Errorf("%s: %d peers, %d co-located hosts; want %d and 2", policy, len(peers), coloc, workers)
		}
	}
}
