package baseline

// chunkTable maps an all-reduce's chunk numbers to records. Chunks come
// mostly in order, so it keeps them in pages of chunkPage entries found
// by page number through a map, the last page used at hand: a lookup of
// the next chunk costs no hashing, and the map holds a page per chunkPage
// chunks instead of an entry per chunk. The zero value is empty.
type chunkTable[T any] struct {
	pages map[uint32]*[chunkPage]*T
	lastN uint32
	last  *[chunkPage]*T
}

// chunkPage is the chunks of one page.
const chunkPage = 512

func (t *chunkTable[T]) page(k uint32, create bool) *[chunkPage]*T {
	n := k / chunkPage
	if t.last != nil && t.lastN == n {
		return t.last
	}
	p := t.pages[n]
	if p == nil {
		if !create {
			return nil
		}
		if t.pages == nil {
			t.pages = map[uint32]*[chunkPage]*T{}
		}
		p = new([chunkPage]*T)
		t.pages[n] = p
	}
	t.last, t.lastN = p, n
	return p
}

// get returns chunk k's record, or nil.
func (t *chunkTable[T]) get(k uint32) *T {
	if p := t.page(k, false); p != nil {
		return p[k%chunkPage]
	}
	return nil
}

// set records v for chunk k.
func (t *chunkTable[T]) set(k uint32, v *T) { t.page(k, true)[k%chunkPage] = v }
