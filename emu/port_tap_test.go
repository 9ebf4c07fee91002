//go:build linux

package emu_test

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/emu/internal/netns"
	"github.com/inabox/inabox/emu/porttest"
	"github.com/inabox/inabox/internal/testenv"
)

// tapMTU is the MTU of the test devices, so jumbo frames are exercised too.
const tapMTU = 9000

// tapPair makes, in a private network namespace, two TAP ports tapA and tapB
// enslaved to a bridge br0 (STP off, so its ports forward at once; IPv6
// off in the namespace, so the kernel stays quiet). Everything goes away
// when the test ends; the host namespace is never touched.
func tapPair(t testing.TB, batch int) (a, b *emu.TAPPort) {
	t.Helper()
	ns := netns.New(t) // skips without /dev/net/tun or CAP_NET_ADMIN
	err := ns.Do(func() error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0", MTU: tapMTU}}
		if err := netlink.LinkAdd(br); err != nil {
			return err
		}
		var err error
		if a, err = emu.NewTAPPort(emu.TAPConfig{Name: "tapA", MTU: tapMTU, BatchSize: batch}); err != nil {
			return err
		}
		if b, err = emu.NewTAPPort(emu.TAPConfig{Name: "tapB", MTU: tapMTU, BatchSize: batch}); err != nil {
			a.Close()
			return err
		}
		for _, p := range []*emu.TAPPort{a, b} {
			l, err := netlink.LinkByName(p.InterfaceName())
			if err == nil {
				err = netlink.LinkSetTxQLen(l, 10000) // the TAP's receive queue
			}
			if err == nil {
				err = netlink.LinkSetMaster(l, br)
			}
			if err != nil {
				a.Close()
				b.Close()
				return err
			}
		}
		return netlink.LinkSetUp(br)
	})
	if err != nil {
		t.Fatalf("setting up tapA/tapB/br0: %v", err)
	}
	t.Cleanup(func() {
		a.Close()
		b.Close()
	})
	return a, b
}

func TestTAPPortConformance(t *testing.T) {
	if err := netns.Available(); err != nil {
		testenv.Skip(t, "needs TAP devices in a private network namespace: "+err.Error())
	}
	for _, batch := range []int{0, 1} {
		name := "batch-default"
		if batch == 1 {
			name = "batch1"
		}
		t.Run(name, func(t *testing.T) {
			porttest.Run(t, func(t *testing.T) (emu.Port, emu.Port) {
				a, b := tapPair(t, batch)
				if a.MaxFrame() != tapMTU+14 {
					t.Errorf("MaxFrame = %d, want %d", a.MaxFrame(), tapMTU+14)
				}
				return a, b
			})
		})
	}
}

// TestTAPPortOwnership checks that a port deletes a device it created and
// leaves in place a device that existed before.
func TestTAPPortOwnership(t *testing.T) {
	ns := netns.New(t)
	nl := ns.Netlink()
	exists := func(name string) bool {
		_, err := nl.LinkByName(name)
		var nf netlink.LinkNotFoundError
		if err != nil && !errors.As(err, &nf) {
			t.Fatalf("LinkByName(%s): %v", name, err)
		}
		return err == nil
	}

	// A device the port creates is up while open and gone after Close.
	var p *emu.TAPPort
	if err := ns.Do(func() (err error) {
		p, err = emu.NewTAPPort(emu.TAPConfig{Name: "tapnew"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !p.Created() || !exists("tapnew") {
		t.Fatalf("Created() = %v, exists = %v; want true, true", p.Created(), exists("tapnew"))
	}
	if l, err := nl.LinkByName("tapnew"); err != nil || l.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("created device is not up: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if exists("tapnew") {
		t.Error("device the port created still exists after Close")
	}

	// A persistent device made beforehand survives the port.
	pre := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "tappre"}, Mode: netlink.TUNTAP_MODE_TAP,
		Flags: netlink.TUNTAP_NO_PI}
	if err := ns.Do(func() error {
		// Tuntap creation opens /dev/net/tun, which acts in the calling
		// thread's namespace (not a netlink handle's), so it runs in Do.
		if err := netlink.LinkAdd(pre); err != nil {
			return fmt.Errorf("creating a persistent TAP: %w", err)
		}
		for _, f := range pre.Fds {
			f.Close()
		}
		var err error
		p, err = emu.NewTAPPort(emu.TAPConfig{Name: "tappre", MTU: 1280})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if p.Created() {
		t.Error("Created() = true for a device that existed")
	}
	if p.MaxFrame() != 1514 {
		t.Errorf("MaxFrame = %d; want 1514 (an existing device keeps its MTU)", p.MaxFrame())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !exists("tappre") {
		t.Error("Close deleted a device the port did not create")
	}
}
