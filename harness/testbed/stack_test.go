package testbed

import (
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
)

// TestSoftwareStack: the software stack's cost lands on the host links of
// the policies that run one (atp, esa, switchml) and on no other's.
func TestSoftwareStack(t *testing.T) {
	stack := SoftwareStack{BitsPerSecond: 46e9, Latency: 3 * time.Microsecond}
	for _, pol := range Names() {
		spec := Spec{Seed: 1, SoftwareStack: stack, Jobs: []JobSpec{{Workers: 2}}}
		c, err := Build(spec, pol, func(job, rank int) []host.Tensor { return nil })
		if err != nil {
			t.Fatal(err)
		}
		e, _ := Lookup(pol)
		wantRate, wantDelay := int64(DefaultRate), time.Duration(DefaultDelay)
		if e.SoftwareStack {
			wantRate, wantDelay = stack.BitsPerSecond, DefaultDelay+stack.Latency
		}
		for _, l := range []*emu.Link{c.Workers[0][1].Link, c.PSs[0].Link} {
			if cfg := l.Config(emu.AtoB); cfg.BitsPerSecond != wantRate || cfg.Delay != wantDelay {
				t.Errorf("%s: host link %d b/s, %v; want %d b/s, %v", pol, cfg.BitsPerSecond, cfg.Delay, wantRate, wantDelay)
			}
		}
	}
}
