//go:build linux

package procnode

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netns"
)

// NetnsDir is where named network namespaces are bind-mounted (as by
// `ip netns add`).
const NetnsDir = "/run/netns"

// InNetns runs fn on an OS thread that has joined the named network
// namespace, then moves the thread back. Sockets and TAP devices opened by fn
// stay in that namespace and work from any thread afterwards. If the thread
// cannot be moved back it is left locked, so the Go runtime retires it
// instead of reusing a thread in the wrong namespace. An empty name runs fn
// in the caller's namespace.
func InNetns(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("procnode: netns %s: %w", name, err)
	}
	defer ns.Close()
	return inHandle(ns, fn)
}

func inHandle(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("procnode: setns: %w", err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("procnode: restoring netns: %w", err) // thread stays locked and dies
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// CreateNetns creates a named network namespace (like `ip netns add`)
// without moving any thread of the caller into it for longer than the call,
// and disables IPv6 in it so the kernel sends no router solicitations or
// MLD reports on the devices made there.
func CreateNetns(name string) error {
	if _, err := os.Stat(filepath.Join(NetnsDir, name)); err == nil {
		return fmt.Errorf("procnode: netns %s already exists", name)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name) // unshares this thread into the new namespace
		if err != nil {
			if serr := netns.Set(orig); serr != nil {
				errc <- fmt.Errorf("procnode: netns %s: %v (and restoring: %v)", name, err, serr)
				return
			}
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("procnode: netns %s: %w", name, err)
			return
		}
		h.Close()
		// /proc/sys/net is per network namespace of the calling thread.
		var serr error
		for _, f := range []string{"all", "default"} {
			p := "/proc/sys/net/ipv6/conf/" + f + "/disable_ipv6"
			if _, err := os.Stat(p); err == nil {
				if err := os.WriteFile(p, []byte("1"), 0o644); err != nil && serr == nil {
					serr = err
				}
			}
		}
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("procnode: netns %s: restoring: %w", name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- serr
	}()
	return <-errc
}

// DeleteNetns removes a named namespace; the kernel destroys it (and the
// veth, bridge and TAP devices in it) once no process or open fd uses it.
func DeleteNetns(name string) error {
	if _, err := os.Stat(filepath.Join(NetnsDir, name)); os.IsNotExist(err) {
		return nil
	}
	return netns.DeleteNamed(name)
}

// NetnsExists reports whether a named namespace exists.
func NetnsExists(name string) bool {
	_, err := os.Stat(filepath.Join(NetnsDir, name))
	return err == nil
}
