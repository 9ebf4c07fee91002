package scenario

import (
	"testing"
	"time"
)

// TestHostStack: each field of a policy's host cost comes from, in turn,
// topology.host_costs (the policy's key, else its variant's policy's), the
// software stack (stack policies only), the sourced figure (unless costs:
// none), and else zero; a field given as zero still overrides.
func TestHostStack(t *testing.T) {
	const head = "jobs:\n  - {name: a, model: resnet50, workers: 2, iterations: 1}\ntopology:\n"
	us := Duration(time.Microsecond)
	for _, c := range []struct {
		name, topo, policy string
		ps                 bool
		want               SoftwareStack
	}{
		{"sourced atp", "", "atp", false, SoftwareStack{Gbps: 46}},
		{"sourced atp ps", "", "atp", true, SoftwareStack{Gbps: 46}},
		{"sourced freeina", "", "freeina", false, SoftwareStack{}},
		{"sourced switchml", "", "switchml", false, SoftwareStack{}},
		{"costs none", "  costs: none\n", "atp", false, SoftwareStack{}},
		{"latency keeps the sourced rate", "  software_stack: {latency: 1us}\n", "atp", false, SoftwareStack{Gbps: 46, Latency: us}},
		{"gbps 0 given overrides", "  software_stack: {gbps: 0}\n", "esa", true, SoftwareStack{}},
		{"stack not on RDMA hosts", "  software_stack: {gbps: 30}\n", "freeina", false, SoftwareStack{}},
		{"stack on switchml", "  software_stack: {gbps: 30}\n", "switchml", true, SoftwareStack{Gbps: 30}},
		{"stack under costs none", "  costs: none\n  software_stack: {gbps: 30}\n", "atp", false, SoftwareStack{Gbps: 30}},
		{"per-policy ps", "  host_costs: {atp: {ps: {gbps: 20}}}\n", "atp", true, SoftwareStack{Gbps: 20}},
		{"per-policy ps leaves workers", "  host_costs: {atp: {ps: {gbps: 20}}}\n", "atp", false, SoftwareStack{Gbps: 46}},
		{"per-policy over stack", "  software_stack: {gbps: 30, latency: 1us}\n  host_costs: {atp: {workers: {gbps: 40}}}\n", "atp", false, SoftwareStack{Gbps: 40, Latency: us}},
		{"per-policy zero overrides", "  host_costs: {esa: {workers: {gbps: 0}}}\n", "esa", false, SoftwareStack{}},
		{"other policy's entry", "  host_costs: {atp: {workers: {gbps: 40}}}\n", "esa", false, SoftwareStack{Gbps: 46}},
		{"rdma nic", "  host_costs: {freeina: {workers: {gbps: 50, latency: 1us}}}\n", "freeina", false, SoftwareStack{Gbps: 50, Latency: us}},
		{"rdma nic under costs none", "  costs: none\n  host_costs: {freeina: {workers: {gbps: 50}}}\n", "freeina", false, SoftwareStack{Gbps: 50}},
		{"variant falls back", "  host_costs: {dynaina: {ps: {latency: 1us}}}\n", "dynaina-pools", true, SoftwareStack{Latency: us}},
		{"tx and rx by layer", "  software_stack: {tx_gbps: 30}\n  host_costs: {atp: {workers: {gbps: 40, rx_gbps: 20}}}\n", "atp", false, SoftwareStack{Gbps: 40, TxGbps: 30, RxGbps: 20}},
		{"variant's own key first", "  host_costs: {dynaina: {ps: {gbps: 10}}, dynaina-pools: {ps: {gbps: 20}}}\n", "dynaina-pools", true, SoftwareStack{Gbps: 20}},
	} {
		s, err := Parse("x.yaml", []byte(head+c.topo), DefaultModels())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := s.HostStack(c.policy, c.ps); got != c.want {
			t.Errorf("%s: HostStack(%s, ps %v) = %+v, want %+v", c.name, c.policy, c.ps, got, c.want)
		}
	}
	if st := (SoftwareStack{Gbps: 40, RxGbps: 20}); st.Tx() != 40 || st.Rx() != 20 {
		t.Errorf("%+v: Tx %v, Rx %v; want 40, 20", st, st.Tx(), st.Rx())
	}
}
