package sw

import (
	"hash/crc32"
	"math/bits"
)

// Hashed is ATP's slot stage: aggregator = CRC32(job, all-reduce, chunk) mod
// Aggregators() in a pool that jobs may share (with Job.Budget B:
// CRC32(job, 0, chunk mod B), ATP's per-application set of B
// aggregators); claimed by the first packet,
// released on completion (results multicast by the switch) or, with
// Job.ResultToPS, by the PS's ACK. A busy aggregator means a collision: the
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

// HashIndex is the aggregator hash shared with the P4 twin: CRC-32 (IEEE,
// as v1model's HashAlgorithm.crc32 on BMv2) over the big-endian bytes of
// job, all-reduce and chunk, modulo n.
func HashIndex(tag Tag, n int) int { return int(tagCRC(tag) % uint32(n)) }

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
	return p.Base + p.mod.of(tagCRC(tag), p.Slots, p.Stride)*p.Stride
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

// of returns x mod slots/stride.
func (a *aggMod) of(x uint32, slots, stride int) int {
	if a.slots != slots || a.stride != stride {
		a.slots, a.stride = slots, stride
		a.n = uint32(slots / stride)
		a.m = ^uint64(0)/uint64(a.n) + 1
	}
	hi, _ := bits.Mul64(a.m*uint64(x), uint64(a.n))
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
