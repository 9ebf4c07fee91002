// Command inahost runs the host role of inabox as a process (see
// docs/processes.md); `inabox up` starts it, or run it by hand with -h.
package main

import (
	"os"

	"github.com/inabox/inabox/harness/up"
)

func main() { os.Exit(up.HostMain(os.Args[1:], os.Stderr)) }
