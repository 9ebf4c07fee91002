package bmv2

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Runner runs STF files on BMv2.
type Runner struct {
	// Program is the compiled program (p4c-bm2-ss's JSON) and Prog its
	// tables and actions (LoadProgram of the same file).
	Program string
	Prog    *Program
	// Switch and CLI are the simple_switch and simple_switch_CLI
	// executables ("": found on PATH).
	Switch, CLI string
	// Dir is where each vector's working directory is made ("": the
	// system's temporary directory); Keep keeps it (its switch log, pcaps
	// and CLI transcript) after a pass, not only after a failure.
	Dir  string
	Keep bool
	// Settle is how long BMv2's log must stay quiet before its packets
	// count as processed (0: 300 ms); Timeout bounds a whole vector (0: 2
	// minutes).
	Settle, Timeout time.Duration
}

// Result is what a vector ran and checked.
type Result struct {
	Packets, Expects, Registers int
	// Processed is how many packets BMv2 logged as received.
	Processed int
	// WorkDir is the vector's working directory, if kept.
	WorkDir string
}

// Failure is a vector that ran and did not pass (as opposed to one that
// could not run).
type Failure struct{ Problems []string }

func (f *Failure) Error() string { return strings.Join(f.Problems, "; ") }

// Run runs the STF file path on BMv2: ports are pcap files (FIFOs in,
// files out), table writes and other CLI commands go through
// simple_switch_CLI in file order, each answered before the next line
// runs; before a register_read and at the end the runner waits until BMv2
// has logged every packet given so far and its log is quiet. Output frames
// are compared per port, in order, with the expect lines, as p4c's runner
// does; register reads with an "# expect V" comment are checked.
//
// BMv2 takes packets from its input files in timestamp order, so it
// processes none while an input that will carry a packet later has none
// yet. A register read between packets therefore runs on a switch of its
// own that is given the vector up to the read (BMv2 is deterministic); the
// whole vector then runs once more for the outputs and the reads after the
// last packet.
//
// A *Failure error says what differed; any other error that the vector
// could not run.
func (r *Runner) Run(ctx context.Context, path string) (Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Result{}, err
	}
	cmds, err := ParseSTF(f)
	f.Close()
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := strings.TrimSuffix(filepath.Base(path), ".stf")

	// mid[i]: register_read i comes before a later packet; its group ends
	// at end[i] (the next packet).
	lastPacket := -1
	for i, c := range cmds {
		if c.Op == "packet" {
			lastPacket = i
		}
	}
	var fail []string
	registers := 0
	mid := func(i int) bool { return cmds[i].Op == "register_read" && i < lastPacket }
	for i := 0; i < len(cmds); {
		if !mid(i) {
			i++
			continue
		}
		end := i
		for end < len(cmds) && cmds[end].Op != "packet" {
			end++
		}
		lo := i
		res, err := r.runOnce(ctx, cmds[:end], name, func(k int) bool { return k >= lo }, false)
		registers += res.Registers
		var fe *Failure
		if errors.As(err, &fe) {
			fail = append(fail, fe.Problems...)
		} else if err != nil {
			return res, err
		}
		i = end
	}
	res, err := r.runOnce(ctx, cmds, name, func(k int) bool { return !mid(k) }, true)
	res.Registers += registers
	var fe *Failure
	if errors.As(err, &fe) {
		fail = append(fe.Problems, fail...)
	} else if err != nil {
		return res, err
	}
	if len(fail) > 0 {
		return res, &Failure{Problems: fail}
	}
	return res, nil
}

// runOnce runs cmds on a fresh simple_switch, sending the register reads
// read says, and comparing outputs with the expect lines if compare.
func (r *Runner) runOnce(ctx context.Context, cmds []Cmd, name string, read func(i int) bool, compare bool) (res Result, err error) {
	dir, err := os.MkdirTemp(r.Dir, "stf-"+name+"-")
	if err != nil {
		return res, err
	}
	var fail []string
	defer func() {
		if r.Keep || err != nil {
			res.WorkDir = dir
		} else {
			os.RemoveAll(dir)
		}
	}()
	prog, err := filepath.Abs(r.Program)
	if err != nil {
		return res, err
	}

	// Ports: every port a packet or expect line names, and every port the
	// tables can send to (TablePorts), so that a packet the vector does not
	// expect is seen wherever it goes; last[p] is the index of port p's
	// last packet command (-1: none).
	ports := map[int]bool{}
	last := map[int]int{}
	for _, p := range TablePorts(cmds) {
		ports[p], last[p] = true, -1
	}
	for i, c := range cmds {
		if c.Op == "packet" || c.Op == "expect" {
			p, _ := c.Packet()
			if !ports[p.Port] {
				last[p.Port] = -1
			}
			ports[p.Port] = true
			if c.Op == "packet" {
				last[p.Port] = i
			}
		}
	}
	var order []int
	for p := range ports {
		order = append(order, p)
	}
	sort.Ints(order)
	for _, p := range order {
		if err := syscall.Mkfifo(filepath.Join(dir, fmt.Sprintf("pcap%d_in.pcap", p)), 0o600); err != nil {
			return res, err
		}
	}

	thrift, err := freePort()
	if err != nil {
		return res, err
	}
	args := []string{"--log-file", "switch", "--log-flush", "--use-files", "0",
		"--thrift-port", strconv.Itoa(thrift), "--device-id", strconv.Itoa(thrift)}
	for _, p := range order {
		args = append(args, "-i", fmt.Sprintf("%d@pcap%d", p, p))
	}
	args = append(args, prog)
	sw := exec.CommandContext(ctx, exe(r.Switch, "simple_switch"), args...)
	sw.Dir = dir
	swOut, err := os.Create(filepath.Join(dir, "switch.stdout"))
	if err != nil {
		return res, err
	}
	defer swOut.Close()
	sw.Stdout, sw.Stderr = swOut, swOut
	if err := sw.Start(); err != nil {
		return res, err
	}
	swDone := make(chan error, 1)
	go func() { swDone <- sw.Wait() }()
	defer func() {
		if sw.ProcessState == nil {
			sw.Process.Signal(syscall.SIGTERM)
			select {
			case <-swDone:
			case <-time.After(5 * time.Second):
				sw.Process.Kill()
				<-swDone
			}
		}
	}()

	// Open the input FIFOs in the order simple_switch does (its -i
	// order): each open blocks until the switch opens the other end.
	//
	// BMv2 merges its input files by timestamp: it needs the next packet
	// of every input not at its end before it takes the earliest. So
	// packets carry increasing timestamps (file order), and each port's
	// input ends (the FIFO is closed) after its last packet, at once for a
	// port that only sends.
	in := map[int]*os.File{}
	defer func() {
		for _, f := range in {
			f.Close()
		}
	}()
	for _, p := range order {
		f, err := openFIFO(ctx, filepath.Join(dir, fmt.Sprintf("pcap%d_in.pcap", p)), swDone)
		if err != nil {
			return res, fmt.Errorf("port %d: %w (see %s)", p, err, swOut.Name())
		}
		in[p] = f
		if _, err := f.Write(pcapHeader()); err != nil {
			return res, err
		}
		if last[p] < 0 {
			f.Close()
			delete(in, p)
		}
	}
	if err := waitListening(ctx, thrift, swDone); err != nil {
		return res, fmt.Errorf("simple_switch: %w (see %s)", err, swOut.Name())
	}

	cli, err := startCLI(ctx, exe(r.CLI, "simple_switch_CLI"), thrift, filepath.Join(dir, "cli.txt"))
	if err != nil {
		return res, err
	}
	defer cli.close()
	log := filepath.Join(dir, "switch.txt")
	settle := r.Settle
	if settle == 0 {
		settle = 300 * time.Millisecond
	}
	var expects []Packet
	for i, c := range cmds {
		switch c.Op {
		case "packet":
			p, _ := c.Packet()
			if _, err := in[p.Port].Write(pcapRecord(p.Data, res.Packets+1)); err != nil {
				return res, fmt.Errorf("line %d: %w", c.Line, err)
			}
			res.Packets++
			if i == last[p.Port] {
				in[p.Port].Close()
				delete(in, p.Port)
			}
		case "expect":
			p, _ := c.Packet()
			expects = append(expects, p)
			res.Expects++
		case "wait":
			if res.Processed, err = waitProcessed(ctx, log, res.Packets, settle, swDone); err != nil {
				return res, err
			}
		default:
			if c.Op == "register_read" && !read(i) {
				continue
			}
			line, err := r.Prog.CLI(c)
			if err != nil {
				return res, fmt.Errorf("%s.stf:%d: %w", name, c.Line, err)
			}
			if c.Op == "register_read" {
				if res.Processed, err = waitProcessed(ctx, log, res.Packets, settle, swDone); err != nil {
					return res, err
				}
			}
			out, err := cli.do(line)
			if err != nil {
				return res, fmt.Errorf("line %d: %s: %w", c.Line, line, err)
			}
			if bad := cliError(out); bad != "" {
				return res, fmt.Errorf("line %d: %s: simple_switch_CLI: %s", c.Line, line, bad)
			}
			want, ok, err := c.Expected()
			if err != nil {
				return res, err
			}
			if ok {
				got, err := registerValue(out)
				if err != nil {
					return res, fmt.Errorf("line %d: %s: %w", c.Line, line, err)
				}
				if got != want {
					fail = append(fail, fmt.Sprintf("line %d: %s = %#x, want %#x", c.Line, line, got, want))
				}
				res.Registers++
			}
		}
	}
	if res.Processed, err = waitProcessed(ctx, log, res.Packets, settle, swDone); err != nil {
		return res, err
	}
	for _, f := range in {
		f.Close()
	}
	in = nil
	cli.close()
	sw.Process.Signal(syscall.SIGTERM)
	select {
	case <-swDone:
	case <-ctx.Done():
		return res, ctx.Err()
	}

	if !compare {
		if len(fail) > 0 {
			return res, &Failure{Problems: fail}
		}
		return res, nil
	}
	// Compare what each port sent with the expect lines.
	got := map[int][][]byte{}
	for p := range ports {
		frames, err := readPcap(filepath.Join(dir, fmt.Sprintf("pcap%d_out.pcap", p)))
		if err != nil {
			return res, fmt.Errorf("port %d: %w", p, err)
		}
		got[p] = frames
	}
	next := map[int]int{}
	for _, e := range expects {
		i := next[e.Port]
		next[e.Port]++
		if i >= len(got[e.Port]) {
			fail = append(fail, fmt.Sprintf("port %d: expected packet %d, got only %d", e.Port, i+1, len(got[e.Port])))
			continue
		}
		if !e.Match(got[e.Port][i]) {
			fail = append(fail, fmt.Sprintf("port %d packet %d differs:\n  got  %x\n  want %s", e.Port, i+1, got[e.Port][i], e.Nibbles))
		}
	}
	for _, p := range order {
		if n := len(got[p]) - next[p]; n > 0 {
			fail = append(fail, fmt.Sprintf("port %d: %d unexpected packet(s), first %x", p, n, got[p][next[p]]))
		}
	}
	if len(fail) > 0 {
		return res, &Failure{Problems: fail}
	}
	return res, nil
}

func exe(set, name string) string {
	if set != "" {
		return set
	}
	return name
}

// freePort returns a TCP port on loopback that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// openFIFO opens a FIFO for writing, giving up if the switch exits or ctx
// ends first.
func openFIFO(ctx context.Context, path string, swDone chan error) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		return o.f, o.err
	case err := <-swDone:
		swDone <- err
		// Unblock the open.
		if f, e := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); e == nil {
			if o := <-ch; o.f != nil {
				o.f.Close()
			}
			f.Close()
		}
		return nil, fmt.Errorf("simple_switch exited before opening its port (%v)", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func waitListening(ctx context.Context, port int, swDone chan error) error {
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-swDone:
			swDone <- err
			return fmt.Errorf("exited before its Thrift server listened (%v)", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitProcessed waits until BMv2's log shows want packets received, every
// recirculated pass received again, and no growth for settle; it returns
// how many receptions (passes included) it shows.
//
// A recirculated pass is logged as another "Processing packet received",
// so counting receptions alone is met early when packets recirculate: with
// two 256-value packets (four passes each) the count reached two after the
// first packet's second pass, and a stall of settle there ended the wait
// before the other passes ran (seen once under load, as a register read
// missing a later pass's lanes).
func waitProcessed(ctx context.Context, log string, want int, settle time.Duration, swDone chan error) (int, error) {
	var size int64 = -1
	quiet := time.Now()
	for {
		b, err := os.ReadFile(log)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
		n := bytes.Count(b, []byte("Processing packet received on port"))
		recirculated := bytes.Count(b, []byte("Recirculating packet"))
		if int64(len(b)) != size {
			size, quiet = int64(len(b)), time.Now()
		}
		if n >= want+recirculated && time.Since(quiet) >= settle {
			return n, nil
		}
		select {
		case err := <-swDone:
			swDone <- err
			return n, fmt.Errorf("simple_switch exited (%v) with %d of %d packets processed", err, n, want)
		case <-ctx.Done():
			return n, fmt.Errorf("%w: BMv2 logged %d of %d packets", ctx.Err(), n, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cli is one simple_switch_CLI, driven a command at a time: each command
// is answered when the CLI prints its next prompt.
type cli struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	log    *os.File
	closed bool
}

const prompt = "RuntimeCmd: "

func startCLI(ctx context.Context, path string, port int, logPath string) (*cli, error) {
	c := &cli{cmd: exec.CommandContext(ctx, path, "--thrift-port", strconv.Itoa(port))}
	var err error
	if c.log, err = os.Create(logPath); err != nil {
		return nil, err
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.cmd.Stderr = c.log
	c.out = bufio.NewReader(stdout)
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	if _, err := c.until(); err != nil {
		c.close()
		return nil, fmt.Errorf("simple_switch_CLI: %w (see %s)", err, logPath)
	}
	return c, nil
}

// until reads the CLI's output up to its next prompt.
func (c *cli) until() (string, error) {
	var b strings.Builder
	for !strings.HasSuffix(b.String(), prompt) {
		r, err := c.out.ReadByte()
		if err != nil {
			return b.String(), fmt.Errorf("no prompt (%w) after %q", err, b.String())
		}
		b.WriteByte(r)
	}
	fmt.Fprint(c.log, b.String())
	return strings.TrimSuffix(b.String(), prompt), nil
}

func (c *cli) do(line string) (string, error) {
	fmt.Fprintln(c.log, line)
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		return "", err
	}
	return c.until()
}

func (c *cli) close() {
	if c.closed {
		return
	}
	c.closed = true
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
	c.log.Close()
}

// cliError returns the error a CLI answer reports, or "".
func cliError(out string) string {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Error") || strings.HasPrefix(l, "Invalid") || strings.Contains(l, "InvalidTableOperation") ||
			strings.Contains(l, "Traceback") || strings.Contains(l, "*** Unknown syntax") {
			return l
		}
	}
	return ""
}

// registerValue parses register_read's answer: "<name>[<i>]= <value>".
func registerValue(out string) (uint64, error) {
	for _, l := range strings.Split(out, "\n") {
		if _, v, ok := strings.Cut(l, "]="); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 0, 64)
		}
	}
	return 0, fmt.Errorf("no register value in %q", out)
}

func pcapHeader() []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint32(b[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(b[4:], 2)
	binary.LittleEndian.PutUint16(b[6:], 4)
	binary.LittleEndian.PutUint32(b[16:], 65535)
	binary.LittleEndian.PutUint32(b[20:], 1) // Ethernet
	return b
}

// pcapRecord is frame as a pcap record stamped sec seconds.
func pcapRecord(frame []byte, sec int) []byte {
	b := make([]byte, 16+len(frame))
	binary.LittleEndian.PutUint32(b[0:], uint32(sec))
	binary.LittleEndian.PutUint32(b[8:], uint32(len(frame)))
	binary.LittleEndian.PutUint32(b[12:], uint32(len(frame)))
	copy(b[16:], frame)
	return b
}

// readPcap reads the frames of a pcap file BMv2 wrote (either byte
// order, microsecond or nanosecond stamps); a missing or empty file has
// none.
func readPcap(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(b) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) < 24 {
		return nil, fmt.Errorf("%s: short pcap header", path)
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("%s: not a pcap file", path)
	}
	var out [][]byte
	for off := 24; off < len(b); {
		if off+16 > len(b) {
			return nil, fmt.Errorf("%s: truncated record header", path)
		}
		n := int(bo.Uint32(b[off+8:]))
		off += 16
		if off+n > len(b) {
			return nil, fmt.Errorf("%s: truncated record", path)
		}
		out = append(out, b[off:off+n])
		off += n
	}
	return out, nil
}
