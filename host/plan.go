package host

import (
	"math"
	"time"
)

// INAPath is how INA-path chunks travel (docs/freeina.md).
type INAPath uint8

const (
	// PathUC: INA-path chunks are UC SEND Only frames the switch absorbs;
	// nothing reaches the PS in the clean case. Loss recovery: UC
	// retransmission after a timeout, then the chunk raw over RC to the PS.
	// The default: the path the experiments run.
	PathUC INAPath = iota
	// PathTrim: every chunk is an RC SEND Only to the PS; the switch
	// aggregates it and forwards it trimmed. RC-pure, but the PS link
	// carries every contribution's headers (docs/freeina.md §8).
	PathTrim
)

// String returns "uc" or "trim".
func (p INAPath) String() string {
	if p == PathTrim {
		return "trim"
	}
	return "uc"
}

// Plan is the partition of one all-reduce's chunks between the two paths.
// Every worker of the job receives the same Plan from the PS, so every
// worker puts a chunk on the same path (a slot only completes if all
// workers send the chunk through it).
//
// Chunks are taken in rounds of INA+PS: in each round the first INA chunks
// go through the switch (chunk c uses aggregator c mod INA of the lease),
// the next PS chunks take the PS path (RC, FlagBypass, summed by the PS).
type Plan struct {
	Chunks uint32
	INA    int // aggregators granted (0: everything on the PS path)
	PS     int // PS chunks per round
}

// OnINA reports whether chunk c takes the INA path.
func (p Plan) OnINA(c uint32) bool {
	switch {
	case p.INA <= 0:
		return false
	case p.PS <= 0:
		return true
	}
	return c%uint32(p.INA+p.PS) < uint32(p.INA)
}

// Slot returns the lease-relative aggregator of INA chunk c (the switch's
// FreeINA slot stage uses the same mapping).
func (p Plan) Slot(c uint32) int { return int(c % uint32(p.INA)) }

// Count returns how many chunks take each path.
func (p Plan) Count() (ina, ps uint32) {
	for c := uint32(0); c < p.Chunks; c++ { // cheap enough at plan time
		if p.OnINA(c) {
			ina++
		}
	}
	return ina, p.Chunks - ina
}

// Measure is what the PS observed of one finished all-reduce.
type Measure struct {
	INAChunks, PSChunks uint32
	// INASpan and PSSpan are the times from the plan to the last result of
	// each path.
	INASpan, PSSpan time.Duration
	// Fallbacks counts INA chunks the PS had to finish (collision, loss of
	// switch state).
	Fallbacks uint32
}

// PathControl is the PS's control law for the PS share (docs/freeina.md):
//
//   - no grant → everything on the PS path;
//   - a grant that covers the pipe (n ≥ PipeSlots or n ≥ chunks) → p = 0;
//   - otherwise the PS path carries a share φ of the chunks, p = round(n·φ/(1−φ)),
//     where φ starts at φ₀ = (1 − n/PipeSlots)·PSShareMax and then tracks the
//     measured path rates of the previous all-reduce:
//     φ ← (1−α)·φ + α·r_ps/(r_ina + r_ps), r = chunks/span, α = 1/2.
//
// It is evaluated once per all-reduce, by the PS only, so all workers get
// the same plan.
type PathControl struct {
	// PipeSlots is how many aggregators keep the INA path busy for a
	// round trip (the bandwidth-delay product in chunks).
	PipeSlots int
	// PSShareMax bounds φ (the PS link also carries every INA chunk's
	// trimmed headers); default 0.5.
	PSShareMax float64

	phi  float64
	have bool
}

// Plan returns the partition for an all-reduce of chunks chunks with n
// aggregators granted.
func (pc *PathControl) Plan(chunks uint32, n int) Plan {
	p := Plan{Chunks: chunks, INA: n}
	if n <= 0 {
		p.INA = 0
		return p
	}
	if uint32(n) >= chunks || (pc.PipeSlots > 0 && n >= pc.PipeSlots) {
		return p
	}
	maxPhi := pc.PSShareMax
	if maxPhi == 0 {
		maxPhi = 0.5
	}
	phi := pc.phi
	if !pc.have {
		phi = maxPhi
		if pc.PipeSlots > 0 {
			phi = (1 - float64(n)/float64(pc.PipeSlots)) * maxPhi
		}
	}
	phi = math.Min(math.Max(phi, 0), maxPhi)
	p.PS = int(math.Round(float64(n) * phi / (1 - phi)))
	return p
}

// Observe feeds the measurement of a finished all-reduce into the law.
func (pc *PathControl) Observe(m Measure) {
	if m.INAChunks == 0 || m.PSChunks == 0 || m.INASpan <= 0 || m.PSSpan <= 0 {
		return // one path idle: nothing to compare; keep φ
	}
	rIna := float64(m.INAChunks) / m.INASpan.Seconds()
	rPS := float64(m.PSChunks) / m.PSSpan.Seconds()
	target := rPS / (rIna + rPS)
	if !pc.have {
		pc.phi, pc.have = target, true
		return
	}
	pc.phi = 0.5*pc.phi + 0.5*target
}

// Phi returns the current PS share estimate.
func (pc *PathControl) Phi() float64 { return pc.phi }
