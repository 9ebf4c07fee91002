// Package testenv is how tests skip for what the machine lacks (root, TAP
// devices, tshark): they skip with the reason, except where the
// environment says nothing may be skipped (INABOX_NO_SKIP=1, which CI sets:
// it is root and installs what the tests need), where a skip is a failure.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// NoSkipVar is the environment variable that turns these skips into
// failures.
const NoSkipVar = "INABOX_NO_SKIP"

// Skip skips t with reason, or fails it if NoSkipVar is set.
func Skip(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(NoSkipVar) != "" {
		t.Fatalf("%s (%s is set: nothing may be skipped here)", reason, NoSkipVar)
	}
	t.Skip(reason)
}

// NeedRoot skips t (Skip) unless the test runs as root.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root: "+why)
	}
}

// LookPath returns the path of the program name, or skips t (Skip),
// saying how to install it.
func LookPath(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Skip(t, name+" not installed ("+install+"; CI installs it)")
	}
	return p
}

// CleanProfile makes cmd (tshark, say) run with a home directory of its
// own, so that what the user installed (Wireshark's personal plugins, such
// as `make wireshark`'s INA dissector, and preferences) does not change
// what a test sees; a test that wants a plugin loads it (-X lua_script:).
func CleanProfile(t testing.TB, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home+"/.config", "XDG_DATA_HOME="+home+"/.local/share")
	return cmd
}
