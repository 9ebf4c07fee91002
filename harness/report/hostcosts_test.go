package report

import "testing"

// TestHostCostsString: the summary names each node type's stack when the
// PSs' differs from the workers', and an RDMA policy's as its NIC's.
func TestHostCostsString(t *testing.T) {
	for _, c := range []struct {
		h    *HostCosts
		want string
	}{
		{nil, "no host cost"},
		{&HostCosts{}, "no host cost"},
		{&HostCosts{SoftwareStackGbps: 46}, "software stack 46 Gb/s"},
		{&HostCosts{SoftwareStackGbps: 46, SoftwareStackLatency: 1e-6}, "software stack 46 Gb/s +1 µs/packet"},
		{&HostCosts{SoftwareStackGbps: 46, PSStackGbps: 20, PSStackGiven: true}, "workers' software stack 46 Gb/s, PSs' software stack 20 Gb/s"},
		{&HostCosts{SoftwareStackGbps: 46, PSStackGiven: true}, "workers' software stack 46 Gb/s, PSs' software stack none"},
		{&HostCosts{NIC: true, SoftwareStackGbps: 50}, "NIC 50 Gb/s"},
		{&HostCosts{NIC: true, PSStackLatency: 2e-6, PSStackGiven: true}, "workers' NIC none, PSs' NIC +2 µs/packet"},
		{&HostCosts{SoftwareStackGbps: 46, SoftwareStackRxGbps: 20, PSStackTxGbps: 30, PSStackGiven: true}, "workers' software stack 46 Gb/s receiving 20 Gb/s, PSs' software stack sending 30 Gb/s"},
		{&HostCosts{PSCores: 12, PSGbpsPerCore: 3.83}, "PS CPU 12 cores × 3.83 Gb/s"},
	} {
		if got := c.h.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.h, got, c.want)
		}
	}
}
