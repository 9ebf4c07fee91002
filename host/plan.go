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
//     where φ starts at φ₀ from the paths' expected rates and then tracks
//     the measured path rates of the previous all-reduce:
//     φ ← (1−α)·φ + α·r_ps/(r_ina + r_ps), r = chunks/span, α = 1/2.
//
// The expected rates, as fractions of one worker link's: r_ina =
// min(1, h/(PipeSlots/2)), h = max(⌊n/2⌋, 1) the INA chunks the grant
// keeps in flight (rule W, docs/freeina.md §11.2) against the
// bandwidth-delay product; r_ps = PSCapacity/Workers, the PS's capacity
// shared by the job's workers. Both paths leave a worker on its one link,
// so where r_ina + r_ps ≥ 1, φ₀ = 1 − r_ina (the PS takes what the INA
// path cannot carry at line rate); otherwise φ₀ = r_ps/(r_ina + r_ps),
// the share that makes both paths finish together.
//
// It is evaluated once per all-reduce, by the PS only, so all workers get
// the same plan.
type PathControl struct {
	// PipeSlots is how many aggregators keep the INA path busy: twice the
	// bandwidth-delay product in chunks (0: any grant keeps it busy).
	PipeSlots int
	// PSCapacity is the PS's rate as a multiple of one worker link's: its
	// link's, or its CPU's where that is lower (0: 1).
	PSCapacity float64
	// Workers is the job's worker count, among which the PS's capacity is
	// shared (0: 1; NewPS sets it per job).
	Workers int
	// WholeRounds makes p the nearest multiple of n (PathUC: INA chunk i
	// of every round uses aggregator i, docs/freeina.md §11.2).
	WholeRounds bool
	// PSShareMax bounds φ (0: no bound below 1). Under PathTrim the PS
	// link also carries every INA chunk's trimmed headers, and NewPS
	// bounds φ at 0.5.
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
	phi := pc.phi
	if !pc.have {
		phi = pc.initialPhi(n)
	}
	if pc.PSShareMax > 0 {
		phi = math.Min(phi, pc.PSShareMax)
	}
	phi = math.Max(phi, 0)
	// p ≤ chunks: beyond that every chunk but the first n is on the PS
	// path anyway (and φ = 1 would divide by zero).
	ps := float64(chunks)
	if phi < 1 {
		ps = math.Min(ps, float64(n)*phi/(1-phi))
	}
	p.PS = int(math.Round(ps))
	if pc.WholeRounds {
		p.PS = (p.PS + n/2) / n * n // the nearest multiple of n
	}
	return p
}

// initialPhi is φ₀ for a grant of n aggregators, from the paths' expected
// rates r_ina and r_ps (fractions of a worker link's): where together they
// exceed the worker's link, which both share, the PS path takes only what
// the INA path cannot carry, 1 − r_ina; otherwise the share that makes both
// finish together, r_ps/(r_ina + r_ps).
func (pc *PathControl) initialPhi(n int) float64 {
	rIna := 1.0
	if pc.PipeSlots > 0 {
		rIna = math.Min(1, float64(max(n/2, 1))/(float64(pc.PipeSlots)/2))
	}
	capacity, workers := pc.PSCapacity, pc.Workers
	if capacity <= 0 {
		capacity = 1
	}
	if workers <= 0 {
		workers = 1
	}
	rPS := capacity / float64(workers)
	if rIna+rPS >= 1 {
		return 1 - rIna
	}
	return rPS / (rIna + rPS)
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
