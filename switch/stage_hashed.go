package sw

import (
	"hash/crc32"
	"math/bits"
)

// Hashed is ATP's slot stage: chunk c of all-reduce a of job j uses
// aggregator HashIndex(j, a, c) of a pool that jobs may share (with
// Job.Budget B: HashIndex(j, 0, c mod B), ATP's per-application set of B
// aggregators); claimed by the first packet, released on completion
// (results multicast by the switch) or, with Job.ResultToPS, by the PS's
// ACK for its chunk, complete or not, or by a retransmission that forces
// its partial sum out to the PS. A busy aggregator means a collision: the
// packet is marked and goes to the PS.
type Hashed struct{}

func (Hashed) Name() string { return "hashed" }

func (Hashed) Locate(j *Job, tag Tag) (int, bool) { return hashLocate(j, tag), true }

// Contend reclaims a completed aggregator (not a held one).
func (Hashed) Contend(j *Job, tag Tag, cur Occupant) Verdict {
	if cur.State == StateComplete {
		return Reclaim
	}
	return Collide
}

func (st Hashed) contribute(c contribution) { c.contend(st) }

// HashIndex is tag's aggregator in a pool of n, shared with the P4 twin:
// chunk c of all-reduce a of job j uses Perm(j, a)(c mod n), where
// Perm(j, a) is a pseudo-random permutation of 0…n−1 keyed by (j, a).
//
// Why a keyed permutation. ATP's hosts give each application its own set
// of distinct aggregators, picked pseudo-randomly (in-ATP/ATP
// common/HashTable.cc, HashNew_crc: salted CRC-32, re-drawn on repeats):
// a job never collides with itself, and two jobs overlap at random. A
// permutation keeps the first property for any n consecutive chunks; its
// key makes the second hold whatever the jobs' chunk numbers. A plain
// CRC-32 of (j, a, c) mod n does neither: it is linear over GF(2), so
// chunk c of job a and chunk c' of job b meet exactly when a fixed linear
// map of c XOR c' hits a constant of the pair. How often two jobs collide
// then depends on how their chunk numbers line up, which differs between
// a scenario at tensor_scale 0.01 (a few thousand chunks, jobs near
// lockstep) and the same at true scale: measured, 6–17 % of a job's
// window landing on another's 285 busy aggregators of 512, where random
// sets give 56 %, and ATP's contended JCT in dynaina-contention 5.4 %
// short of true scale at 0.01 (docs/results.md, "ATP's aggregator hash").
func HashIndex(tag Tag, n int) int {
	if n <= 1 {
		return 0
	}
	return int(permute(tag.Job(), tag.AllReduce(), tag.Chunk()%uint32(n), uint32(n)))
}

// The keyed permutation of HashIndex (and of the P4 twin): a Feistel
// network of PermRounds rounds on the k bits of the smallest 2^k ≥ n,
// applied again while the value is n or more ("cycle walking", at most
// PermWalks passes; then n is subtracted).
const (
	PermRounds = 4
	PermWalks  = 8
)

// permute is Perm(job, ar)(x) for x < n, n ≥ 2.
func permute(job, ar uint16, x, n uint32) uint32 {
	k := uint(bits.Len32(n - 1))
	for range PermWalks {
		x = feistel(job, ar, x, k)
		if x < n {
			return x
		}
	}
	return x - n
}

// feistel permutes x in [0, 2^k): the high ⌈k/2⌉ bits l and the low ⌊k/2⌋
// bits r; each round i replaces (l, r) by (r, l XOR F(i, r)), the widths
// swapping with the halves. F(i, r) is mix32 of the CRC-32 of the tag
// (job, ar, i<<24 | r): non-linear, so the network is.
func feistel(job, ar uint16, x uint32, k uint) uint32 {
	lb, rb := (k+1)/2, k/2
	l, r := x>>rb, x&(1<<rb-1)
	for i := range uint32(PermRounds) {
		f := mix32(tagCRC(MakeTag(job, ar, i<<24|r)))
		l, r = r, (l^f)&(1<<lb-1)
		lb, rb = rb, lb
	}
	return l<<rb | r
}

// mix32 is Bob Jenkins' 32-bit integer hash ("6-shift",
// burtleburtle.net/bob/hash/integer.html): additions, XORs and shifts by
// constants only, so a switch stage computes it without a multiplier.
func mix32(a uint32) uint32 {
	a = (a + 0x7ed55d16) + (a << 12)
	a = (a ^ 0xc761c23c) ^ (a >> 19)
	a = (a + 0x165667b1) + (a << 5)
	a = (a + 0xd3a2646c) ^ (a << 9)
	a = (a + 0xfd7046c5) + (a << 3)
	a = (a ^ 0xb55a4f09) ^ (a >> 16)
	return a
}

// tagCRC is the CRC-32 (IEEE) of tag's 8 big-endian bytes.
func tagCRC(tag Tag) uint32 {
	// Slicing-by-8 over exactly 8 bytes: the eight table lookups are
	// independent (crc32.ChecksumIEEE would make its argument escape).
	t := uint64(tag)
	c := ^uint32(0) ^ uint32(byte(t>>56)) ^ uint32(byte(t>>48))<<8 ^ uint32(byte(t>>40))<<16 ^ uint32(byte(t>>32))<<24
	crc := crc8[7][byte(c)] ^ crc8[6][byte(c>>8)] ^ crc8[5][byte(c>>16)] ^ crc8[4][c>>24] ^
		crc8[3][byte(t>>24)] ^ crc8[2][byte(t>>16)] ^ crc8[1][byte(t>>8)] ^ crc8[0][byte(t)]
	return ^crc
}

// hashLocate is the head of tag's aggregator in j's pool by HashIndex: of
// tag, or with a budget of (job, 0, chunk mod Budget).
func hashLocate(j *Job, tag Tag) int {
	p := j.Pool
	if j.Budget > 0 {
		tag = MakeTag(tag.Job(), 0, tag.Chunk()%uint32(j.Budget))
	}
	n := p.mod.aggregators(p.Slots, p.Stride) // p.Slots / p.Stride, without a division
	if n <= 1 {
		return p.Base
	}
	x := uint32(p.mod.of(tag.Chunk(), n))
	return p.Base + int(j.perm.of(tag.Job(), tag.AllReduce(), x, n))*p.Stride
}

// permCache remembers one all-reduce's permutation, Perm(job, ar)(x) for
// the x it was asked, so that the workers of a chunk, and the chunks n
// apart, pay for it once. An entry is valid when its high half is gen;
// moving to another all-reduce or pool size bumps gen, so packets of
// alternating all-reduces cost a recomputation each, never a clear.
type permCache struct {
	ar  uint16
	n   uint32
	gen uint32
	e   []uint64 // gen<<32 | Perm(job, ar)(x)
}

// of is Perm(job, ar)(x) for x < n, n ≥ 2 (job is the cache's owner).
func (pc *permCache) of(job, ar uint16, x, n uint32) uint32 {
	if pc.gen != 0 && pc.ar == ar && pc.n == n && x < uint32(len(pc.e)) {
		if v := pc.e[x]; uint32(v>>32) == pc.gen {
			return uint32(v)
		}
	}
	return pc.miss(job, ar, x, n)
}

// miss is of for an x the cache does not hold: it moves the cache to
// (ar, n) if need be and remembers Perm(job, ar)(x).
func (pc *permCache) miss(job, ar uint16, x, n uint32) uint32 {
	if pc.gen == 0 || pc.ar != ar || pc.n != n {
		if uint32(len(pc.e)) != n {
			pc.e = make([]uint64, n)
			pc.gen = 0
		}
		pc.gen++
		if pc.gen == 0 { // wrapped: old entries could look valid
			clear(pc.e)
			pc.gen = 1
		}
		pc.ar, pc.n = ar, n
	}
	v := permute(job, ar, x, n)
	pc.e[x] = uint64(pc.gen)<<32 | uint64(v)
	return v
}

// aggMod is a pool's x mod Aggregators() without a division: Lemire's
// fastmod (exact for every 32-bit x and divisor), its multiplier
// recomputed whenever the pool's Slots or Stride differ from the ones it
// was made for.
type aggMod struct {
	slots, stride int
	n             uint32
	m             uint64
}

// aggregators returns slots/stride (the divisor of of), computed once for
// each slots and stride.
func (a *aggMod) aggregators(slots, stride int) uint32 {
	if a.slots != slots || a.stride != stride {
		a.slots, a.stride = slots, stride
		a.n = uint32(slots / stride)
		a.m = 0
		if a.n > 0 {
			a.m = ^uint64(0)/uint64(a.n) + 1
		}
	}
	return a.n
}

// of returns x mod n, where n, not 0, is what aggregators returned last.
func (a *aggMod) of(x, n uint32) int {
	hi, _ := bits.Mul64(a.m*uint64(x), uint64(n))
	return int(hi)
}

// crc8[k][b] is the CRC-32 (IEEE, reflected) state contribution of byte b
// followed by k zero bytes.
var crc8 = func() (t [8][256]uint32) {
	for i := 0; i < 256; i++ {
		t[0][i] = crc32.IEEETable[i]
	}
	for k := 1; k < 8; k++ {
		for i := 0; i < 256; i++ {
			p := t[k-1][i]
			t[k][i] = crc32.IEEETable[byte(p)] ^ p>>8
		}
	}
	return t
}()
