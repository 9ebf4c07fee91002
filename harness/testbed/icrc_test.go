package testbed

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
)

// TestPcapICRC: receivers trust the ICRC of a sealed frame
// (emu.Packet.Sealed) and the switch updates its replicas' ICRC for their
// rewritten headers only, yet every frame captured on every switch port —
// sent and received, under every policy and both FreeINA paths — is a
// RoCEv2 frame whose ICRC a full recomputation confirms; the results the
// switch multicast (frames it sent) are among them.
func TestPcapICRC(t *testing.T) {
	type run struct {
		policy string
		path   host.INAPath
	}
	runs := []run{{"freeina", host.PathUC}, {"freeina", host.PathTrim}}
	for _, p := range allPolicies {
		if p != "freeina" {
			runs = append(runs, run{p, host.PathUC})
		}
	}
	for _, r := range runs {
		name := r.policy
		if r.policy == "freeina" {
			name += "-" + r.path.String()
		}
		t.Run(name, func(t *testing.T) {
			spec := Spec{Seed: 3, Jobs: []JobSpec{{Workers: 4}}, INAPath: r.path}
			var caps []*bytes.Buffer
			_, _ = runExact(t, r.policy, spec, 2, 64*50, time.Second, func(c *Testbed) {
				for port := 0; port < c.ports(); port++ {
					b := new(bytes.Buffer)
					if err := c.Net.Capture(SwitchNode, port, b); err != nil {
						t.Fatal(err)
					}
					caps = append(caps, b)
				}
			})
			frames, fromSwitch := 0, 0
			for port, b := range caps {
				pr, err := pcapgo.NewReader(b)
				if err != nil {
					t.Fatalf("port %d: %v", port, err)
				}
				for {
					f, _, err := pr.ReadPacketData()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("port %d: %v", port, err)
					}
					frames++
					if !rdma.CheckICRC(f) {
						t.Fatalf("port %d frame %d: bad ICRC (% x)", port, frames, f)
					}
					if rdma.RoCE(f).IPv4().Src() == SwitchAddr.IP {
						fromSwitch++
					}
				}
			}
			if frames == 0 || fromSwitch == 0 && r.policy != "ps" && r.policy != "none" {
				t.Fatalf("%d frames captured, %d from the switch", frames, fromSwitch)
			}
			t.Logf("%d frames, %d from the switch's address, every ICRC right", frames, fromSwitch)
		})
	}
}
