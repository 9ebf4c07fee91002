//go:build linux

// Package netns gives tests a private, throw-away Linux network namespace, so
// that they can create TAP devices and bridges without touching the host's
// namespace.
//
// Go schedules goroutines on any OS thread, and a network namespace belongs to
// a thread. So everything that must happen inside the namespace runs through
// Do, on a fresh goroutine locked to its thread and switched into the
// namespace; the goroutine exits without unlocking, so the runtime discards
// that thread instead of reusing it in the wrong namespace. File descriptors
// opened inside (a TAP fd, a socket) keep working from any thread afterwards.
package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Available reports why tests cannot create namespaces and TAP devices here:
// nil if /dev/net/tun exists and the process has CAP_NET_ADMIN (and
// CAP_SYS_ADMIN, which unshare(CLONE_NEWNET) needs) in its effective set.
func Available() error {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("/dev/net/tun is not available: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, c := range []struct {
		bit  uint
		name string
	}{{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"}, {unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN"}} {
		if data[c.bit/32].Effective&(1<<(c.bit%32)) == 0 {
			return fmt.Errorf("%s is not in the effective capability set", c.name)
		}
	}
	return nil
}

// NS is a network namespace created for one test.
type NS struct {
	h  vnetns.NsHandle
	nl *netlink.Handle
}

// New creates a network namespace with IPv6 disabled (so the kernel sends no
// router solicitations or MLD reports) and removes it when the test ends. It
// skips the test, saying why, when Available reports an error.
func New(t testing.TB) *NS {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("skipping: needs a private network namespace and TAP devices: %v", err)
	}
	type result struct {
		h   vnetns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		h, err := vnetns.New()
		if err != nil {
			ch <- result{err: fmt.Errorf("new netns: %w", err)}
			return
		}
		for _, f := range []string{"all", "default"} {
			path := "/proc/sys/net/ipv6/conf/" + f + "/disable_ipv6"
			if err := os.WriteFile(path, []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				h.Close()
				ch <- result{err: fmt.Errorf("disable IPv6: %w", err)}
				return
			}
		}
		ch <- result{h: h}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("netns: %v", r.err)
	}
	nl, err := netlink.NewHandleAt(r.h)
	if err != nil {
		r.h.Close()
		t.Fatalf("netns: netlink handle: %v", err)
	}
	ns := &NS{h: r.h, nl: nl}
	t.Cleanup(ns.close)
	return ns
}

// Netlink returns a netlink handle bound to the namespace, usable from any
// goroutine. It is closed when the test ends.
func (ns *NS) Netlink() *netlink.Handle { return ns.nl }

// Do runs fn on a locked OS thread inside the namespace and returns its
// error. Package-level netlink functions and new file descriptors inside fn
// act in the namespace.
func (ns *NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := vnetns.Set(ns.h); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// close deletes every link left in the namespace and drops the last
// references to it, which frees it.
func (ns *NS) close() {
	if links, err := ns.nl.LinkList(); err == nil {
		for _, l := range links {
			if l.Attrs().Name != "lo" {
				ns.nl.LinkDel(l)
			}
		}
	}
	ns.nl.Close()
	ns.h.Close()
}
