package up

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/inabox/inabox/internal/procnode"
)

// bridgeNetfilterOff turns the bridge-nf-call sysctls off in the namespace
// it is given, where br_netfilter is loaded, and leaves the caller's
// namespace as it was.
func TestBridgeNetfilterOff(t *testing.T) {
	needRoot(t)
	host, herr := os.ReadFile(bridgeNFSysctls[0])
	ns := NamePrefix + "nftest-" + strconv.Itoa(os.Getpid())
	if err := procnode.CreateNetns(ns); err != nil {
		t.Fatal(err)
	}
	defer procnode.DeleteNetns(ns)
	found, err := bridgeNetfilterOff(ns)
	if err != nil {
		t.Fatal(err)
	}
	if errors.Is(herr, fs.ErrNotExist) {
		if found {
			t.Error("found bridge netfilter sysctls without br_netfilter")
		}
		t.Skip("br_netfilter not loaded: nothing to turn off")
	}
	if !found {
		t.Fatal("br_netfilter is loaded but its sysctls were not found in the namespace")
	}
	err = procnode.InNetns(ns, func() error {
		for _, p := range bridgeNFSysctls {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.TrimSpace(string(b)) != "0" {
				t.Errorf("%s = %s in %s", p, b, ns)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(bridgeNFSysctls[0]); string(after) != string(host) {
		t.Errorf("the host's %s changed: %q → %q", bridgeNFSysctls[0], host, after)
	}
}
