package sw

import "github.com/inabox/inabox/switch/inahdr"

// FreeINAJob says where a job's GRANTs go: to every member of the job's
// multicast group (each through its egress rewrite) and to its PS (egress
// rewrite PSRID, out of PSPort).
type FreeINAJob struct {
	Job    uint16
	PSPort int
	PSRID  uint16
}

// FreeINAControl is FreeINA's control plane (docs/freeina.md §3): an ALLOC
// gets a first-fit lease from the lease table (FreeINA.Alloc, AllocExact
// for an exact re-ALLOC) and is answered with a GRANT to the job's group
// and its PS; a FREE ends the lease; a timer frees leases idle for
// LeaseIdle. A reboot loses every lease. Its methods run on the
// emulator's goroutine (or before the run).
type FreeINAControl struct {
	f      *FreeINA
	grants grants
	idle   leaseTimer
}

// Control-plane timer keys of FreeINAControl.
const freeinaLeaseTimer = 1

var _ ControlPlane = (*FreeINAControl)(nil)

// NewFreeINAControl returns the control plane of lease table f.
func NewFreeINAControl(f *FreeINA) *FreeINAControl {
	return &FreeINAControl{f: f, grants: grants{}, idle: leaseTimer{key: freeinaLeaseTimer}}
}

// AddJob registers where job j's GRANTs go.
func (fc *FreeINAControl) AddJob(j FreeINAJob) { fc.grants[j.Job] = j }

// Start implements ControlPlane: (after a crash) the idle timer is armed
// again if leases are held.
func (fc *FreeINAControl) Start(c *CtlEnv) {
	fc.idle.armed = false
	fc.idle.arm(c, fc.f)
}

// Frames implements ControlPlane: nothing to do; a packet that uses a
// lease marks it used at the time the Node gives the switch with each
// batch.
func (fc *FreeINAControl) Frames(c *CtlEnv) {}

// Control implements ControlPlane: ALLOC and FREE.
func (fc *FreeINAControl) Control(c *CtlEnv, port int, m inahdr.Ctl) {
	switch m.Op {
	case inahdr.CtlAlloc:
		var l Lease
		if m.Exact {
			l = fc.f.AllocExact(c.Now(), m.Job, m.AllReduce, m.Chunks, m.Want)
		} else {
			l = fc.f.Alloc(c.Now(), m.Job, m.AllReduce, m.Chunks, m.Want)
		}
		fc.grants.send(c, l)
		fc.idle.arm(c, fc.f)
	case inahdr.CtlFree:
		fc.f.Free(m.Job, m.AllReduce)
	}
}

// Timer implements ControlPlane: idle leases expire.
func (fc *FreeINAControl) Timer(c *CtlEnv, key uint64) {
	if key != freeinaLeaseTimer {
		return
	}
	fc.idle.armed = false
	fc.f.Expire(c.Now())
	fc.idle.arm(c, fc.f)
}

// Settle implements ControlPlane.
func (fc *FreeINAControl) Settle(c *CtlEnv) {}

// Reset implements ControlPlane: every lease is lost.
func (fc *FreeINAControl) Reset() {
	fc.f.Reset()
	fc.idle.armed = false
}

// grants is where each job's GRANTs go (FreeINAJob by job id).
type grants map[uint16]FreeINAJob

// send sends GRANT(l) (Slots 0: no lease, the PS path) to the job's group
// and its PS; nothing for a job without an entry.
func (g grants) send(c *CtlEnv, l Lease) {
	fj, ok := g[l.Job]
	if !ok {
		return
	}
	c.SendJob(inahdr.Ctl{Op: inahdr.CtlGrant, Job: l.Job, AllReduce: l.AllReduce, Base: l.Base, Slots: l.Slots, Chunks: l.Chunks},
		McastMember{RID: fj.PSRID, Port: fj.PSPort})
}

// leaseTimer is the idle-lease timer of a control plane over a lease
// table: armed, every LeaseIdle/2, while the table holds leases.
type leaseTimer struct {
	key   uint64
	armed bool
}

func (t *leaseTimer) arm(c *CtlEnv, f *FreeINA) {
	if t.armed || !f.HasLeases() {
		return
	}
	c.SetTimer(c.Now()+f.Config().LeaseIdle/2, t.key)
	t.armed = true
}
