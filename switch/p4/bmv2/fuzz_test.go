package bmv2

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseSTF: no input makes the STF reader, or what a runner does with
// what it read (packets, expected register values, the ports it watches,
// the CLI translation against a program), panic; a file that parses has
// packet and expect lines whose packets decode.
func FuzzParseSTF(f *testing.F) {
	for _, pat := range []string{"*_last_contribution_multicast.stf", "*_lpm_forward_and_bypass.stf", "*_ctl_packet_out.stf", "*_freeina_partial_100.stf"} {
		names, _ := filepath.Glob(filepath.Join("../../../testdata/stf", pat))
		if len(names) != 1 {
			f.Fatalf("%s: %d vectors", pat, len(names))
		}
		b, err := os.ReadFile(names[0])
		if err != nil {
			f.Fatal(err)
		}
		// A few table writes and the scenario: small seeds keep the
		// fuzzer's minimization quick.
		head, scen, _ := strings.Cut(string(b), "# --- scenario ---\n")
		lines := strings.SplitAfter(head, "\n")
		f.Add(strings.Join(lines[:min(12, len(lines))], "") + scen)
	}
	f.Add("add ipv4_lpm dst:0x0b****** forward(port:3)\nexpect 3 0a0b****$\n")
	f.Add("mc_node_create 1 2 3\nregister_read MyIngress.ina_owner 5 # expect 0x7\n")
	p := tinyProgram(f)
	f.Fuzz(func(t *testing.T, src string) {
		cmds, err := ParseSTF(strings.NewReader(src))
		if err != nil {
			return
		}
		TablePorts(cmds)
		for _, c := range cmds {
			switch c.Op {
			case "packet", "expect":
				if _, err := c.Packet(); err != nil {
					t.Fatalf("line %d: parsed, but its packet does not decode: %v", c.Line, err)
				}
			case "register_read":
				_, _, _ = c.Expected()
			}
			_, _ = p.CLI(c)
		}
	})
}
