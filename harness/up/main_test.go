package up

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
)

// roleEnv makes the test binary act as inaswitch, inahost or inaps (the
// fallback when the commands cannot be built).
const roleEnv = "INABOX_UP_TEST_ROLE"

// binDir holds inaswitch, inahost and inaps built by TestMain (without the
// race detector, so the processes run at full speed under go test -race).
var binDir string

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
	case "switch":
		os.Exit(SwitchMain(os.Args[1:], os.Stderr))
	case "host":
		os.Exit(HostMain(os.Args[1:], os.Stderr))
	case "ps":
		os.Exit(PSMain(os.Args[1:], os.Stderr))
	default:
		fmt.Fprintln(os.Stderr, "unknown role", os.Getenv(roleEnv))
		os.Exit(2)
	}
	// Start os/signal's permanent goroutine now, so the goroutine-leak
	// checks do not count it against the first Up.
	_, stop := signal.NotifyContext(context.Background(), syscall.SIGUSR2)
	stop()
	dir, err := os.MkdirTemp("", "inabox-up-bin-")
	goBin, lerr := exec.LookPath("go")
	if lerr != nil && os.Getenv("GOROOT") != "" {
		goBin, lerr = filepath.Join(os.Getenv("GOROOT"), "bin", "go"), nil
	}
	if err == nil && lerr == nil {
		cmd := exec.Command(goBin, "build", "-o", dir+string(filepath.Separator), "github.com/inabox/inabox/cmd/inaswitch", "github.com/inabox/inabox/cmd/inahost", "github.com/inabox/inabox/cmd/inaps",
			"github.com/inabox/inabox/cmd/inabox") // inabox: for the inabox fault test
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		if out, berr := cmd.CombinedOutput(); berr != nil {
			fmt.Fprintf(os.Stderr, "building the commands failed (%v); the tests re-execute the test binary instead:\n%s", berr, out)
		} else {
			binDir = dir
		}
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// testCommand runs the built command for a role, or the test binary as
// that role.
func testCommand(role string, args []string) *exec.Cmd {
	if binDir != "" {
		return exec.Command(filepath.Join(binDir, "ina"+role), args...)
	}
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	return cmd
}
