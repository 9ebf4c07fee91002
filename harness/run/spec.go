package run

import (
	"math"
	"time"

	"github.com/inabox/inabox/emu/nodes"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/testbed"
	"github.com/inabox/inabox/host"
	sw "github.com/inabox/inabox/switch"
)

// testbedSpec is scenario s's testbed under policy: its links at the scaled rates, its
// switch, its jobs as planned, and the protocol timers stretched by the
// scenario's time scale (testbed.ScaledTimers).
func testbedSpec(s *scenario.Scenario, policy string, seed uint64, plans []scenario.JobPlan, realtime bool) testbed.Spec {
	t := s.Topology
	values := t.Switch.ValuesPerPacket
	stride := sw.SlotsPerAggregator(values)
	sp := testbed.Spec{Seed: seed, LinkBitsPerSecond: s.LinkBitsPerSecond(), PSLinkBitsPerSecond: s.PSLinkBitsPerSecond(),
		LinkDelay: t.LinkDelay.D(), QueuePackets: t.QueuePackets, ValuesPerPacket: values,
		Aggregators: max(t.Switch.Slots/stride, 1),
		PassTime:    t.Switch.PassTime.D(), Latency: t.Switch.Latency.D(), Realtime: realtime}
	scale := func(gbps float64) int64 { return int64(math.Round(gbps * 1e9 * s.Scaling.RateScale)) }
	stack := func(ps bool) *testbed.SoftwareStack {
		st := s.HostStack(policy, ps)
		return &testbed.SoftwareStack{BitsPerSecond: scale(st.Gbps), TxBitsPerSecond: scale(st.TxGbps), RxBitsPerSecond: scale(st.RxGbps),
			Latency: st.Latency.D()}
	}
	sp.WorkerStack, sp.PSStack = stack(false), stack(true)
	if c := t.PS.CPU; c != nil {
		sp.PSCPU = nodes.CPUConfig{Cores: c.Cores, BitsPerSecond: scale(c.GbpsPerCore), PerPacket: c.PerPacket.D(), QueuePackets: c.QueuePackets}
	}
	switch t.PS.Placement {
	case scenario.PlacementShared:
		sp.PSPlacement, sp.PSCount = testbed.PSShared, t.PS.Count
	case scenario.PlacementCoLocated:
		sp.PSPlacement, sp.PSLinkBitsPerSecond = testbed.PSCoLocated, 0 // its worker's link
	}
	if sp.LinkDelay == 0 {
		sp.LinkDelay = time.Nanosecond // the testbed's zero is its 1 µs default
	}
	if sp.PassTime == 0 {
		sp.PassTime = -1 // untimed
	}
	if sp.Latency == 0 {
		sp.Latency = -1
	}
	sp.ATPWindow, sp.ATPBudget = s.ATP.Window, s.ATP.Budget
	if fw := s.ATP.FirstWait; fw != nil {
		sp.ATPFirstWait = fw.D()
		if sp.ATPFirstWait == 0 {
			sp.ATPFirstWait = -1 // none: the testbed's zero is its default
		}
	}
	sp.ESAReclaimHeld = s.ESA.ReclaimHeld
	sp.Scheduler.MinSlots = s.DynaINA.MinSlots
	if sp.Scheduler.MinSlots == 0 && sp.Aggregators < 64 {
		sp.Scheduler.MinSlots = sp.Aggregators // the default 64, capped
	}
	if s.FreeINAPath == "trim" {
		sp.INAPath = host.PathTrim
	}
	for _, p := range plans {
		// DynaINA's profile is per all-reduce: with buckets, each bucket's
		// mean size, and the iteration's compute shared among them.
		nb := int64(len(p.Buckets))
		p := p
		sp.Jobs = append(sp.Jobs, testbed.JobSpec{Workers: p.Workers, Arrival: p.Arrival, Compute: p.Compute / time.Duration(nb),
			Priority: uint8(p.Priority), AllReduces: p.AllReduces(), GradientBytes: p.Bytes / nb,
			Timeline: func(rank int) host.Timeline { return p.Timeline(seed, rank) }})
	}
	sp.Timers = testbed.ScaledTimers(sp.LinkBitsPerSecond, sp.LinkDelay, s.Scaling.RateScale)
	sp.RateScale = s.Scaling.RateScale
	// Every FreeINA all-reduce asks for the window that keeps a worker link
	// busy (its path control needs no PS share then); DynaINA's demand is
	// the same number (testbed.DemandRTT). The RC QPs are the testbed's:
	// DefaultQP with the ACK timeout derived from these links; the PSN
	// window stays DefaultQP's 128 (a window of twice the scaled RC round
	// trip, ≈570 packets at 1 Gb/s and 200 µs links, made 16 workers
	// overflow the PS port's queue, and the go-back-N storms exhausted RC's
	// retry count: measured on freeina-multi, a stall).
	sp.WantSlots = testbed.PipeSlots(sp.LinkBitsPerSecond, sp.LinkDelay, max(sp.Latency, 0), values)
	return sp
}
