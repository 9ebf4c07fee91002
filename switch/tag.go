package sw

// Tag is an aggregator's owner tag: job (16 bits), all-reduce (16) and chunk
// (32). Zero means free (job 0 is reserved).
type Tag uint64

// MakeTag builds a tag.
func MakeTag(job, allreduce uint16, chunk uint32) Tag {
	return Tag(job)<<48 | Tag(allreduce)<<32 | Tag(chunk)
}

func (t Tag) Job() uint16       { return uint16(t >> 48) }
func (t Tag) AllReduce() uint16 { return uint16(t >> 32) }
func (t Tag) Chunk() uint32     { return uint32(t) }

// SlotState is the state of an aggregator.
type SlotState uint8

const (
	// StateFree: no owner.
	StateFree SlotState = iota
	// StateClaimed: owned, some contributions absorbed, not complete.
	StateClaimed
	// StateComplete: all contributions in; the result was sent and is kept
	// for retransmissions until the slot stage lets another chunk reclaim
	// it.
	StateComplete
	// StateHeld: complete and sent to the PS; held until the PS's ACK (ATP).
	StateHeld
)

func (s SlotState) String() string {
	switch s {
	case StateFree:
		return "free"
	case StateClaimed:
		return "claimed"
	case StateComplete:
		return "complete"
	case StateHeld:
		return "held"
	}
	return "invalid"
}

// Occupant is the owner of an aggregator as a slot stage sees it.
type Occupant struct {
	Tag      Tag
	State    SlotState
	Priority uint8 // priority of the owner's job when it claimed
	Bitmap   uint32
}
