package run

import "runtime"

// resultCheck checks a job's results chunk by chunk as its workers store
// them (each worker's host.ResultSink is a rankSink), so that no worker
// keeps a result: at true scale the results were nearly all of a run's
// memory. A lazy job's reference sum is made a block at a time, once for
// all its workers, and kept until each of them has stored the block's
// chunks; a job that is not lazy holds its reference already.
//
// What a worker stored is judged when every worker has finished the
// all-reduce (end), as when results were kept: the lowest wrong element,
// how many there are, and whether every chunk came.
type resultCheck struct {
	gen     *tensorGen
	job     int
	workers int
	values  int // per chunk
	ars     map[int]*arCheck
	// last is the all-reduce of the last chunk (a worker's chunks come in
	// runs of one all-reduce).
	last    *arCheck
	lastK   int
	spare   [][]int32 // reference blocks no longer needed, for reuse
	scratch refScratch
}

// refBlockElems is how many elements of a lazy job's reference sum are
// made at a time (256 KiB of int32). A variable for tests.
var refBlockElems = 1 << 16

// arCheck is the check of one all-reduce that some worker has stored a
// chunk of and end has not judged yet.
type arCheck struct {
	n, chunks   int
	blockChunks int               // chunks per reference block
	blocks      map[int]*refBlock // a lazy job's reference blocks some worker still needs
	ranks       []rankCheck
}

// refBlock is elements [b×blockChunks×values, …) of a reference sum and how
// many (worker, chunk) pairs of it have not been stored yet.
type refBlock struct {
	sum  []int32
	left int
}

// rankCheck is what one worker stored of an all-reduce.
type rankCheck struct {
	seen      []uint64 // chunks stored, a bit each
	stored    int      // chunks stored (each counted once)
	bad       int      // elements wrong, over every store
	first     int      // the lowest wrong element (bad > 0)
	got, want int32    // its value and the reference's
}

func newResultCheck(g *tensorGen, job, values int) *resultCheck {
	return &resultCheck{gen: g, job: job, workers: g.plans[job].Workers, values: values, ars: map[int]*arCheck{}, lastK: -1}
}

// rankSink is worker rank's host.ResultSink.
type rankSink struct {
	c    *resultCheck
	rank int
}

func (s rankSink) ResultChunk(i int, k uint32, vals []int32, _ int8) { s.c.chunk(s.rank, i, k, vals) }

// ar returns all-reduce k's check, begun if need be.
func (c *resultCheck) ar(k int) *arCheck {
	if c.last != nil && c.lastK == k {
		return c.last
	}
	a := c.ars[k]
	if a == nil {
		p := c.gen.plans[c.job]
		n := int(p.Buckets[k%len(p.Buckets)].Elements)
		chunks := (n + c.values - 1) / c.values
		a = &arCheck{n: n, chunks: chunks, blockChunks: max(refBlockElems/c.values, 1), ranks: make([]rankCheck, c.workers)}
		for r := range a.ranks {
			a.ranks[r].seen = make([]uint64, (chunks+63)/64)
		}
		if c.gen.isLazy(c.job) {
			a.blocks = map[int]*refBlock{}
		}
		c.ars[k] = a
	}
	c.last, c.lastK = a, k
	return a
}

// chunk checks vals, chunk k of worker rank's result of all-reduce i.
func (c *resultCheck) chunk(rank, i int, k uint32, vals []int32) {
	a := c.ar(i)
	rc := &a.ranks[rank]
	lo := int(k) * c.values
	if int(k) >= a.chunks || lo+len(vals) > a.n {
		rc.wrong(lo, 0, 0, len(vals)) // cannot happen: the endpoint checks the chunk's bounds
		return
	}
	first := rc.seen[k/64]&(1<<(k%64)) == 0
	var want []int32
	var blk *refBlock
	if a.blocks == nil {
		want = c.gen.reference(c.job, i)[lo : lo+len(vals)]
	} else {
		b := int(k) / a.blockChunks
		if blk = a.blocks[b]; blk == nil {
			blk = c.block(a, i, b)
		}
		off := lo - b*a.blockChunks*c.values
		want = blk.sum[off : off+len(vals)]
	}
	for e, w := range want {
		if vals[e] != w {
			rc.wrong(lo+e, vals[e], w, 1)
		}
	}
	if first {
		rc.seen[k/64] |= 1 << (k % 64)
		rc.stored++
		if blk != nil {
			if blk.left--; blk.left == 0 {
				delete(a.blocks, int(k)/a.blockChunks)
				if len(c.spare) < 4 {
					c.spare = append(c.spare, blk.sum)
				}
			}
		}
	}
}

// wrong records n wrong elements from e on (got where want at e), keeping
// the lowest wrong element, as a whole result's check would name.
func (rc *rankCheck) wrong(e int, got, want int32, n int) {
	if rc.bad == 0 || e < rc.first {
		rc.first, rc.got, rc.want = e, got, want
	}
	rc.bad += n
}

// block makes reference block b of all-reduce k, counting the (worker,
// chunk) pairs of it still to be stored.
func (c *resultCheck) block(a *arCheck, k, b int) *refBlock {
	c0 := b * a.blockChunks
	c1 := min(c0+a.blockChunks, a.chunks)
	lo, hi := c0*c.values, min(c1*c.values, a.n)
	var sum []int32
	if n := len(c.spare); n > 0 && cap(c.spare[n-1]) >= hi-lo {
		sum, c.spare = c.spare[n-1][:hi-lo], c.spare[:n-1]
	} else {
		sum = make([]int32, hi-lo)
	}
	c.gen.refInto(c.job, k, lo, sum, &c.scratch)
	blk := &refBlock{sum: sum, left: (c1 - c0) * c.workers}
	for r := range a.ranks {
		for ch := c0; ch < c1; ch++ {
			blk.left -= int(a.ranks[r].seen[ch/64] >> (ch % 64) & 1)
		}
	}
	if blk.left > 0 {
		a.blocks[b] = blk
	}
	return blk
}

// end judges every worker's result of all-reduce k (all of them have
// finished it) and forgets it: diffs as compare's, and each one's first
// wrong value and the chunks it stored.
func (c *resultCheck) end(k int) (ds []diff, gots []int32, stored []int, chunks int) {
	a := c.ar(k)
	delete(c.ars, k)
	c.last, c.lastK = nil, -1
	for _, b := range a.blocks {
		if len(c.spare) < 4 {
			c.spare = append(c.spare, b.sum)
		}
	}
	ds, gots, stored = make([]diff, c.workers), make([]int32, c.workers), make([]int, c.workers)
	for r, rc := range a.ranks {
		ds[r] = diff{n: a.n, bad: rc.bad, first: -1}
		if rc.bad > 0 {
			ds[r].first, ds[r].want, gots[r] = rc.first, rc.want, rc.got
		}
		stored[r] = rc.stored
	}
	return ds, gots, stored, a.chunks
}

// asyncChecks runs the result checks of a run's lazy jobs on a goroutine of
// their own, beside the emulator's: making their reference sums is a fifth
// of a true-scale run's CPU, and a pure function of the seed. Chunks go to
// it in batches, in the order they were stored, so each resultCheck sees
// what it would have seen on the emulator's goroutine; sync waits until it
// has checked every chunk sent, and only then does the run read a verdict
// (resultCheck.end). No output depends on it (TestRunCheckAsStored).
type asyncChecks struct {
	work   chan *chunkBatch // batches to check; nil asks for a sync
	free   chan *chunkBatch // checked batches, emptied
	synced chan struct{}
	done   chan struct{}
	cur    *chunkBatch // being filled
}

// chunkBatch is chunks stored one after the other, their values back to
// back in vals.
type chunkBatch struct {
	chunks []batchedChunk
	vals   []int32
}

type batchedChunk struct {
	c       *resultCheck
	rank, i int
	k       uint32
	n       int // values
}

// asyncBatchValues is how many values fill a batch (1 MiB). A variable for
// tests.
var asyncBatchValues = 1 << 18

// asyncBatches is how many batches exist: one filling, the others queued
// or being checked.
const asyncBatches = 3

// asyncCheck says whether runs check lazy jobs' results on a goroutine of
// their own (unless Options.ChecksInline): where there is a second CPU to
// run it. A variable for tests.
var asyncCheck = runtime.GOMAXPROCS(0) > 1

func startAsyncChecks() *asyncChecks {
	a := &asyncChecks{work: make(chan *chunkBatch, asyncBatches), free: make(chan *chunkBatch, asyncBatches),
		synced: make(chan struct{}), done: make(chan struct{}), cur: &chunkBatch{}}
	for range asyncBatches - 1 {
		a.free <- &chunkBatch{}
	}
	go a.loop()
	return a
}

func (a *asyncChecks) loop() {
	defer close(a.done)
	for b := range a.work {
		if b == nil {
			a.synced <- struct{}{}
			continue
		}
		off := 0
		for _, ch := range b.chunks {
			ch.c.chunk(ch.rank, ch.i, ch.k, b.vals[off:off+ch.n])
			off += ch.n
		}
		b.chunks, b.vals = b.chunks[:0], b.vals[:0]
		a.free <- b
	}
}

// add queues chunk k of worker rank's result of all-reduce i for c, a copy
// of vals.
func (a *asyncChecks) add(c *resultCheck, rank, i int, k uint32, vals []int32) {
	b := a.cur
	b.chunks = append(b.chunks, batchedChunk{c: c, rank: rank, i: i, k: k, n: len(vals)})
	b.vals = append(b.vals, vals...)
	if len(b.vals) >= asyncBatchValues {
		a.flush()
	}
}

// flush sends the batch being filled, if any.
func (a *asyncChecks) flush() {
	if len(a.cur.chunks) == 0 {
		return
	}
	a.work <- a.cur
	a.cur = <-a.free
}

// sync returns once every chunk added so far has been checked.
func (a *asyncChecks) sync() {
	a.flush()
	a.work <- nil
	<-a.synced
}

// stop ends the goroutine (the run is over).
func (a *asyncChecks) stop() {
	close(a.work)
	<-a.done
}

// asyncSink is worker rank's host.ResultSink when its job's checks run on
// the asyncChecks goroutine.
type asyncSink struct {
	a    *asyncChecks
	c    *resultCheck
	rank int
}

func (s asyncSink) ResultChunk(i int, k uint32, vals []int32, _ int8) {
	s.a.add(s.c, s.rank, i, k, vals)
}
