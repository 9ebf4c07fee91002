package procnode

import (
	"fmt"

	"github.com/inabox/inabox/emu"
)

// openUDP opens an Attachment's UDP backend (BackendUDP): Dev is
// "LOCAL->REMOTE" as in emu's port spec without its "udp:" prefix, e.g.
// 10.77.1.2:7000->10.77.0.2:7001, or a host name on the remote side
// (looked up once here; a caller that must wait for a name resolves it
// first). The socket is bound in the attachment's namespace (Open runs
// this inside Spec.Netns).
func openUDP(a Attachment) (emu.Port, error) {
	spec, err := emu.ParsePortSpec("udp:" + a.Dev)
	if err != nil {
		return nil, fmt.Errorf("procnode: port %d: %w", a.Port, err)
	}
	if spec, err = spec.Resolve(); err != nil {
		return nil, fmt.Errorf("procnode: port %d: %w", a.Port, err)
	}
	u, err := emu.NewUDPPortConfig(emu.UDPConfig{Local: spec.Local, Remote: spec.Remote, BatchSize: a.Batch})
	if err != nil {
		return nil, fmt.Errorf("procnode: port %d: %w", a.Port, err)
	}
	return u, nil
}
