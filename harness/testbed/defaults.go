package testbed

import (
	"math"
	"time"

	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	sw "github.com/inabox/inabox/switch"
)

// Defaults of a testbed whose Spec leaves a field zero, and the formulas
// that derive protocol parameters from the links (docs/freeina.md §8.1,
// §11).
const (
	// DefaultRate is every link's rate: 100 Gb/s.
	DefaultRate = 100e9
	// DefaultDelay is every link's propagation delay (a rack: 1 µs incl.
	// NIC latency).
	DefaultDelay = time.Microsecond
	// DefaultOverhead is Ethernet's preamble+SFD (8), FCS (4) and IFG (12),
	// added to every frame on the wire.
	DefaultOverhead = 24
	// DefaultLinkMTU is every link's MTU: jumbo frames, which RoCE's
	// 4096-byte path MTU (DefaultQP.MTU) needs, as RoCE fabrics run them.
	DefaultLinkMTU = 9000
	// DefaultPassTime is one pipeline pass (≈1 Gpass/s per pipe, Tofino-1
	// order of magnitude); DefaultLatency the parser-to-deparser latency.
	DefaultPassTime = time.Nanosecond
	DefaultLatency  = 500 * time.Nanosecond
	// DefaultQueuePackets bounds every link queue (per direction).
	DefaultQueuePackets = 4096
	// DefaultValues is the int32 values per INA packet (one pipeline pass).
	DefaultValues = 64
	// DefaultATPFirstWait is Spec.ATPFirstWait's default: ATP's client
	// waits 50 ms for a tensor's first message before it resends
	// (in-ATP/ATP client/p4ml_manager.cc, timeout_value = 0.05; 0.0002
	// once a message has come).
	DefaultATPFirstWait = 50 * time.Millisecond
	// RCHops is the number of links an RC round trip crosses in the star:
	// requester → switch → responder, then the ACK back.
	RCHops = 4
)

// DefaultQP is the RC QP template: 4 KiB MTU, 7 retries, 128 PSNs in
// flight (≥ 2 × the bandwidth-delay product of a worker link at 256 values
// per packet; a larger window makes every go-back-N after a loss or a
// reordering longer, and puts more duplicates into the queue it resends
// into), and the local ACK timeout RCTimeoutExp gives for the default
// links (100 Gb/s, 1 µs, 4096-packet queues, 64 values per packet):
// exponent 7, 524 µs. A testbed derives the timeout from its own links.
var DefaultQP = rdma.Config{MTU: 4096, RetryCount: 7, MaxUnacked: 128, TOS: 2,
	Timeout: RCTimeoutExp(DefaultRate, DefaultDelay, DefaultQueuePackets, ChunkWireBytes(DefaultValues), RCHops)}

// RCTimeoutExp returns the local ACK timeout exponent (rdma.Config.Timeout,
// 4.096 µs × 2^exp) for an RC connection over hops links of rate bit/s
// (the slowest on the path) and delay each, whose drop-tail queues hold
// queuePackets frames of at most frameBytes on the wire: the smallest
// exponent whose timeout exceeds by 1/16 (switch latency and reordering
// delays, not in the bound) the longest round trip,
//
//	hops × (delay + (queuePackets + 1) × frameBytes × 8 / rate),
//
// every queue on the way full when the request and then its ACK reach it.
// A shorter timeout fires while the ACK is still queued: go-back-N then
// resends the whole window into the queues that are already full, they
// drop, and the retransmissions feed on themselves until the retry count
// is exhausted (8 PS-only workers on one 100 Gb/s PS port with 2 %
// reordering: exponent 4, 65.5 µs, failed with 2 M queue drops).
func RCTimeoutExp(rate int64, delay time.Duration, queuePackets, frameBytes, hops int) uint8 {
	perHop := float64(delay) + float64(queuePackets+1)*float64(frameBytes)*8/float64(rate)*1e9
	need := time.Duration(float64(hops) * perHop * 17 / 16)
	exp := uint8(1)
	for exp < 31 && rdma.LocalACKTimeout(exp) <= need {
		exp++
	}
	return exp
}

// ChunkWireBytes is the bytes a chunk of values int32 occupies on a link:
// headers, INA header, values, ICRC and Ethernet overhead.
func ChunkWireBytes(values int) int {
	return rdma.HeadersLen + rdma.BTHLen + 20 + 4*values + rdma.ICRCLen + DefaultOverhead
}

// PipeSlots is the number of aggregators that keeps a worker link busy for
// two slot round trips: worker → switch → worker is 2 × delay + pipeline
// latency + 2 × a chunk's serialization (the switch stores and forwards:
// a chunk crosses the uplink, then the downlink), and the window is twice
// that round trip in chunks, rounded up, plus one. (With one serialization
// and rounding down the window fell one slot short wherever serialization
// is not small against the delay — 7 instead of 8 at 1 Gb/s and 2 µs
// links — and FreeINA ran 13 % below line rate there.)
func PipeSlots(rate int64, delay, latency time.Duration, values int) int {
	ser := float64(ChunkWireBytes(values)*8) / float64(rate) // seconds
	rtt := (2*delay + latency).Seconds() + 2*ser
	return int(math.Ceil(2*rtt/ser)) + 1
}

// RingWindow is the ring's RC PSN window: a worker → neighbour → ACK round
// trip crosses four links and the switch twice, which is PipeSlots' span
// (two slot round trips); twice that, plus the ACK coalescing (an ACK per
// 64 PSNs at most), keeps the link busy. At least DefaultQP's 128.
// (With 128 PSNs the ring ran at 2.2× its bound at every scale.)
func RingWindow(rate int64, delay, latency time.Duration, values int) int {
	return max(DefaultQP.MaxUnacked, 2*PipeSlots(rate, delay, latency, values)+64)
}

// UCTimeout is FreeINA's UC-path retransmission timeout: 1.5 × (a slot
// round trip plus the time a worker link takes to send half the
// aggregators wanted, the most a contribution can queue behind), at least
// 10 µs. (Measured: 3× costs 1.7× the time at 0.1 % loss; 1× fires
// spuriously.)
func UCTimeout(rate int64, delay, latency time.Duration, values, want int) time.Duration {
	if want == 0 {
		want = 256
	}
	ser := float64(ChunkWireBytes(values)*8) / float64(rate) * 1e9
	rtt := 2*delay + latency + time.Duration(ser*float64(want/2+1))
	return max(3*rtt/2, 10*time.Microsecond)
}

// maxUCRetries bounds UCRetries: workers count timeouts per chunk in a
// uint16.
const maxUCRetries = 1<<16 - 1

// UCRetries is how many UC timeouts of ucTimeout a FreeINA worker waits
// before it sends the chunk over RC instead: enough to span four RC ACK
// timeouts of ackTimeout, at least 16. A fallback that comes sooner than
// RC recovers a loss (a PLAN or a pull lost twice) puts chunks on the RC
// path while it is stalled: they hold every worker's window, the next
// chunks time out and fall back too, and the all-reduce ends on the PS
// path (measured in docs/freeina.md §11.4: two timeouts' worth still
// cascaded at 5 % loss, four did not). The span holds once the worker has
// a result of the all-reduce; before, its timeouts back off (a peer may
// not have begun: UCMaxWait), and the same count spans far longer.
func UCRetries(ucTimeout, ackTimeout time.Duration) int {
	if ucTimeout <= 0 {
		return 16
	}
	return min(maxUCRetries, max(16, int((4*ackTimeout+ucTimeout-1)/ucTimeout)))
}

// UCMaxWait is the longest a FreeINA worker's UC timeout backs off to
// while no result of the all-reduce has come back (a peer that has not
// begun it, host.WorkerConfig.UCMaxWait): ucTimeout·2^host.MaxBackoff, at
// most half the switch's lease idle timeout leaseIdle (0: the switch's
// default, 2 ms) — a waiting chunk's resends are what keeps its lease
// from expiring idle while the peer is late — and at least ucTimeout.
func UCMaxWait(ucTimeout, leaseIdle time.Duration) time.Duration {
	if leaseIdle == 0 {
		leaseIdle = sw.DefaultLeaseIdle
	}
	return max(min(ucTimeout<<host.MaxBackoff, leaseIdle/2), ucTimeout)
}

// UCBeginWait is how long a FreeINA worker's chunk waits for a late peer
// before it goes raw over RC (host.WorkerConfig.UCBeginWait): the time from
// its send to its retries-th timeout when the waits back off from
// ucTimeout to at most maxWait. The testbed takes the true-scale timeouts,
// so that a peer late by the same compute time makes the same fallbacks at
// every rate scale (docs/freeina.md §12).
func UCBeginWait(ucTimeout time.Duration, retries int, maxWait time.Duration) time.Duration {
	at := ucTimeout
	for k := 1; k < retries; k++ {
		at += max(min(ucTimeout<<min(k-1, host.MaxBackoff), maxWait), ucTimeout)
	}
	return at
}

// KeepAlive is how often a FreeINA PS renews the lease of an all-reduce
// whose INA chunks have begun to come raw (host.PSConfig.KeepAlive): a
// quarter of the switch's lease idle timeout leaseIdle (0: the switch's
// default), so that three renewals in a row may be lost before the lease
// idles out.
func KeepAlive(leaseIdle time.Duration) time.Duration {
	if leaseIdle == 0 {
		leaseIdle = sw.DefaultLeaseIdle
	}
	return leaseIdle / 4
}

// DemandRTT is the RTT that makes DynaINA's demand B·RTT/(8·(4V+80)) equal
// to PipeSlots(rate, delay, latency, values).
func DemandRTT(rate int64, delay, latency time.Duration, values int) time.Duration {
	n := PipeSlots(rate, delay, latency, values)
	return time.Duration(float64(n) * float64(8*(4*values+80)) / float64(rate) * 1e9)
}

// TimerUnit is the unit of the protocol timers a scaled scenario
// stretches (ScaledTimers): 65.5 µs at 100 Gb/s times the time scale
// 100 Gb/s / rate (a queue of the same packets drains that much slower),
// plus two round trips of propagation (a scaled scenario lengthens the
// links to keep the bandwidth-delay product), rounded up to a power-of-two
// multiple of 4.096 µs like an RC ACK timeout.
func TimerUnit(rate int64, delay time.Duration) time.Duration {
	const exp100G = 4 // 4.096 µs × 2^4 = 65.5 µs
	k := max(1, float64(DefaultRate)/float64(rate))
	need := time.Duration(float64(rdma.LocalACKTimeout(exp100G))*k) + 4*delay
	exp := uint8(exp100G)
	for exp < 31 && rdma.LocalACKTimeout(exp) < need {
		exp++
	}
	return rdma.LocalACKTimeout(exp)
}

// Timers are the protocols' timeouts; a zero field takes the endpoint's
// default (in brackets).
type Timers struct {
	// GrantTimeout is the FreeINA PS's ALLOC retransmission timeout
	// [50 µs]; LeaseIdle frees a FreeINA lease idle that long [2 ms];
	// ResultTimeout makes a FreeINA worker fetch a result that long
	// overdue [200 µs].
	GrantTimeout, LeaseIdle, ResultTimeout time.Duration
	// RTO is the ATP and ESA clients' retransmission timeout [100 µs],
	// SwitchMLRTO SwitchML's [50 µs].
	RTO, SwitchMLRTO time.Duration
}

// ScaledTimers returns the protocol timeouts for links of rate and delay,
// as run, in a scenario scaled by rateScale (scaling.rate_scale, in
// (0, 1]). The unit is TimerUnit rounded in true-scale time: the true-scale
// unit (links of rate / rateScale and delay × rateScale) stretched by
// 1/rateScale. A queue of the scaled run drains 1/rateScale slower and
// its links are stretched as much, so a timeout stretched so fires at the
// same point of the all-reduce as at true scale. (Rounding the unit up
// to a power of two after scaling made ATP's RTO 0.64× the true-scale one
// at rate_scale 0.01 and 2 µs links, and ATP's JCT in dynaina-contention
// 27 % longer: docs/results.md, "Why ATP's scaled JCT was 27 % long".)
// In units: the PS's ALLOC retransmission 1, the FreeINA workers' result
// timeout 3, ATP's and ESA's retransmission timeout 1.5 (↔ ATP's 100 µs
// at 100 Gb/s) and SwitchML's 0.75; a lease's idle timeout is 2 ms + 10
// link delays + 1 unit.
func ScaledTimers(rate int64, delay time.Duration, rateScale float64) Timers {
	if !(rateScale > 0 && rateScale <= 1) {
		rateScale = 1
	}
	trueUnit := TimerUnit(int64(math.Round(float64(rate)/rateScale)), time.Duration(math.Round(float64(delay)*rateScale)))
	u := time.Duration(math.Round(float64(trueUnit) / rateScale))
	return Timers{GrantTimeout: u, LeaseIdle: 2*time.Millisecond + 10*delay + u, ResultTimeout: 3 * u,
		RTO: u * 3 / 2, SwitchMLRTO: u * 3 / 4}
}
