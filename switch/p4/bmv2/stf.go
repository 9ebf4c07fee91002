// Package bmv2 runs STF test vectors (testdata/stf) against BMv2's
// simple_switch with a program compiled by p4c's BMv2 backend: the BMv2
// half of `make p4-difftest`, whose Go half is `go test ./switch -run
// TestSTF`.
//
// It replaces p4c's Python STF runner (backends/bmv2/run-bmv2-test.py),
// which needs a p4c source and build tree, recompiles the program for
// every vector, sleeps a second before each packet that follows a table
// write, reports success when its configuration skips BMv2, and differs
// between p4c versions in the STF it accepts. Here the program is
// compiled once; each vector gets a fresh simple_switch whose ports are
// pcap FIFOs, table writes go through one simple_switch_CLI and each is
// answered before the next line runs, register reads are checked against
// their "# expect" comments, and a vector fails unless BMv2 logged every
// packet it was given.
package bmv2

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Cmd is one command of an STF file.
type Cmd struct {
	Line int    // 1-based line number
	Op   string // add, setdefault, packet, expect, or a simple_switch_CLI command passed through
	Args []string
	// Comment is the text after '#', trimmed.
	Comment string
}

// Packet is a packet or expect line's port and bytes. For an expect line
// Nibbles holds the hex digits, '*' for any, and Exact whether the frame
// must end there ('$').
type Packet struct {
	Port    int
	Data    []byte // packet
	Nibbles string // expect
	Exact   bool
}

// passThrough are the simple_switch_CLI commands an STF file may carry
// unchanged (as p4c's runner passes them).
var passThrough = map[string]bool{
	"mc_mgrp_create": true, "mc_node_create": true, "mc_node_associate": true,
	"register_read": true, "register_write": true, "register_reset": true,
	"counter_read": true, "counter_write": true,
	"mirroring_add": true, "mirroring_add_mc": true, "mirroring_delete": true, "mirroring_get": true,
}

// ParseSTF reads an STF file: one command per line, '#' to the end of a
// line a comment. It checks each command's shape (a known command, a port
// and hex bytes for packet and expect); tables and actions are checked
// against a program by Program.CLI.
func ParseSTF(r io.Reader) ([]Cmd, error) {
	var out []Cmd
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		line, comment, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		c := Cmd{Line: ln, Op: strings.ToLower(f[0]), Args: f[1:], Comment: strings.TrimSpace(comment)}
		switch {
		case c.Op == "packet" || c.Op == "expect":
			if _, err := c.Packet(); err != nil {
				return nil, fmt.Errorf("line %d: %w", ln, err)
			}
		case c.Op == "add" || c.Op == "setdefault":
			if len(c.Args) < 2 {
				return nil, fmt.Errorf("line %d: %s needs a table and an action", ln, c.Op)
			}
		case passThrough[c.Op], c.Op == "wait":
		default:
			return nil, fmt.Errorf("line %d: unknown STF command %q", ln, f[0])
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// Packet returns a packet or expect command's port and bytes.
func (c Cmd) Packet() (Packet, error) {
	if len(c.Args) < 1 {
		return Packet{}, fmt.Errorf("%s without a port", c.Op)
	}
	port, err := strconv.Atoi(c.Args[0])
	if err != nil || port < 0 {
		return Packet{}, fmt.Errorf("%s: bad port %q", c.Op, c.Args[0])
	}
	h := strings.ToLower(strings.Join(c.Args[1:], ""))
	p := Packet{Port: port}
	if c.Op == "packet" {
		if p.Data, err = hex.DecodeString(h); err != nil || len(p.Data) == 0 {
			return Packet{}, fmt.Errorf("packet: bad hex bytes")
		}
		return p, nil
	}
	p.Nibbles, p.Exact = strings.CutSuffix(h, "$")
	if strings.Trim(p.Nibbles, "0123456789abcdef*") != "" {
		return Packet{}, fmt.Errorf("expect: bad hex nibbles")
	}
	return p, nil
}

// Match reports whether frame matches expect packet e: every nibble but
// '*' equal, and no longer than e if e is exact.
func (e Packet) Match(frame []byte) bool {
	got := hex.EncodeToString(frame)
	if len(got) < len(e.Nibbles) || (e.Exact && len(got) != len(e.Nibbles)) {
		return false
	}
	for i := 0; i < len(e.Nibbles); i++ {
		if c := e.Nibbles[i]; c != '*' && c != got[i] {
			return false
		}
	}
	return true
}

// Expected returns the value a register_read's comment expects ("expect
// 0x3"), if it has one.
func (c Cmd) Expected() (uint64, bool, error) {
	f := strings.Fields(c.Comment)
	if c.Op != "register_read" || len(f) != 2 || f[0] != "expect" {
		return 0, false, nil
	}
	v, err := strconv.ParseUint(f[1], 0, 64)
	if err != nil {
		return 0, false, fmt.Errorf("line %d: bad expected value %q", c.Line, f[1])
	}
	return v, true, nil
}

// TablePorts returns the ports a vector's table writes name, in order:
// the ports of mc_node_create, and the values of every key or action
// parameter called port or ending in _port (ina_worker's key, forward's
// port, set_job's ps_port, set_ctl's cpu_port). A runner watches them
// besides those of packet and expect lines, so that an unexpected packet
// is caught on whatever port the program sends it to.
func TablePorts(cmds []Cmd) []int {
	seen := map[int]bool{}
	var out []int
	add := func(v string) {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 0, 16)
		if err != nil || seen[int(n)] {
			return
		}
		seen[int(n)] = true
		out = append(out, int(n))
	}
	for _, c := range cmds {
		switch c.Op {
		case "mc_node_create":
			for _, a := range c.Args[min(1, len(c.Args)):] {
				add(a)
			}
		case "add", "setdefault":
			for _, a := range c.Args {
				a = strings.Trim(a, ",)")
				if i := strings.LastIndexByte(a, '('); i >= 0 {
					a = a[i+1:]
				}
				k, v, ok := strings.Cut(a, ":")
				if ok && (k == "port" || strings.HasSuffix(k, "_port")) {
					add(v)
				}
			}
		}
	}
	sort.Ints(out)
	return out
}
