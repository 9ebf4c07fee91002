package testbed

import (
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/host/baseline"
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

// TestHostStacks: Spec.WorkerStack and PSStack land on the workers' and
// the PSs' links under every policy, RDMA ones too, in place of
// SoftwareStack; a co-located PS's link is its worker's.
func TestHostStacks(t *testing.T) {
	ws := SoftwareStack{BitsPerSecond: 50e9, TxBitsPerSecond: 40e9, Latency: time.Microsecond}
	ps := SoftwareStack{BitsPerSecond: 20e9, RxBitsPerSecond: 10e9}
	for _, pol := range Names() {
		for _, pl := range []PSPlacement{PSDedicated, PSCoLocated} {
			spec := Spec{Seed: 1, SoftwareStack: SoftwareStack{BitsPerSecond: 1e9}, WorkerStack: &ws, PSStack: &ps,
				PSPlacement: pl, Jobs: []JobSpec{{Workers: 2}}}
			c, err := Build(spec, pol, func(job, rank int) []host.Tensor { return nil })
			if err != nil {
				t.Fatal(err)
			}
			wantPS := ps
			if pl == PSCoLocated {
				wantPS = ws
			}
			if c.Stack() != ws || c.PSStack() != ps {
				t.Errorf("%s %v: Stack %+v, PSStack %+v", pol, pl, c.Stack(), c.PSStack())
			}
			// A worker's link and a co-located PS's start at the host, a
			// dedicated PS's at the switch.
			psSends := emu.BtoA
			if pl == PSCoLocated {
				psSends = emu.AtoB
			}
			for _, l := range []struct {
				name  string
				link  *emu.Link
				sends emu.Dir
				want  SoftwareStack
			}{{"worker", c.Workers[0][1].Link, emu.AtoB, ws}, {"ps", c.PSs[0].Link, psSends, wantPS}} {
				for _, d := range []emu.Dir{emu.AtoB, emu.BtoA} {
					cfg, rate := l.link.Config(d), l.want.Rx()
					if d == l.sends {
						rate = l.want.Tx()
					}
					if cfg.BitsPerSecond != rate || cfg.Delay != DefaultDelay+l.want.Latency {
						t.Errorf("%s %v: %s link direction %v: %d b/s, %v; want %d b/s, %v", pol, pl, l.name, d, cfg.BitsPerSecond, cfg.Delay,
							rate, DefaultDelay+l.want.Latency)
					}
				}
			}
		}
	}
}

// TestATPWindow: Spec.ATPWindow caps the ATP and ESA workers' window, and
// only theirs.
func TestATPWindow(t *testing.T) {
	for _, pol := range []string{"atp", "esa", "switchml"} {
		spec := Spec{Seed: 1, ATPWindow: 100, Jobs: []JobSpec{{Workers: 2}}}
		base, err := Build(Spec{Seed: 1, Jobs: []JobSpec{{Workers: 2}}}, pol, func(job, rank int) []host.Tensor { return nil })
		if err != nil {
			t.Fatal(err)
		}
		c, err := Build(spec, pol, func(job, rank int) []host.Tensor { return nil })
		if err != nil {
			t.Fatal(err)
		}
		got, was := windowOf(c), windowOf(base)
		want := was
		if pol != "switchml" {
			want = min(was, 100)
		}
		if got != want || (pol != "switchml" && was <= 100) {
			t.Errorf("%s: window %d with the cap (%d without), want %d", pol, got, was, want)
		}
	}
}

func windowOf(c *Testbed) int {
	return c.Workers[0][0].Endpoint.(*baseline.INAWorker).Window()
}
