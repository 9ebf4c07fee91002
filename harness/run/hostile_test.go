package run

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/harness/scenario"
)

// writeCorpus rewrites the hostile inputs into the scenario fuzz corpus.
var writeCorpus = flag.Bool("write-corpus", false, "write the hostile inputs into harness/scenario/testdata/fuzz/FuzzParseScenario")

// fuzzCorpus is the committed seed corpus of scenario.FuzzParseScenario.
const fuzzCorpus = "../scenario/testdata/fuzz/FuzzParseScenario"

// maxCorpusFile is the largest hostile input committed to the corpus; a
// larger one (the 2 MiB file) is made by this test only.
const maxCorpusFile = 64 << 10

// hostileJob is a valid job line for the hostile inputs.
const hostileJob = "jobs:\n  - {name: a, model: resnet50, workers: 2, iterations: 1}\n"

// hostileTiny is a valid scenario that runs in milliseconds, for inputs that
// change one field of it.
const hostileTiny = "scaling: {tensor_scale: 0.0001, rate_scale: 0.001}\ntopology: {link_delay: 10us}\n"

// hostileInputs are scenario files written to break the loader: alias
// bombs, deep nesting, a file over the size limit, numbers out of every
// range, and valid scenarios that are huge to run. Each name is its corpus
// file's.
func hostileInputs() []struct {
	name string
	data []byte
} {
	var out []struct {
		name string
		data []byte
	}
	seen := map[string]int{}
	add := func(name, data string) {
		if seen[name]++; seen[name] > 1 {
			name += "-" + strconv.Itoa(seen[name])
		}
		out = append(out, struct {
			name string
			data []byte
		}{"hostile-" + name, []byte(data)})
	}
	// alias bombs: billion laughs (each level 9 uses of the one below),
	// under a known field and as merge keys; an alias of itself
	bomb := func(key string, levels int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s:\n  - &l0 [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n", key)
		for i := 1; i < levels; i++ {
			fmt.Fprintf(&b, "  - &l%d [%s]\n", i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 9), ","))
		}
		return b.String()
	}
	add("alias-bomb-jobs", bomb("jobs", 9))
	add("alias-bomb-models", bomb("models", 9)+hostileJob)
	var merge strings.Builder
	merge.WriteString("x0: &m0 {name: a, model: resnet50, workers: 2, iterations: 1}\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&merge, "x%d: &m%d {<<: [*m%d, *m%d, *m%d, *m%d]}\n", i, i, i-1, i-1, i-1, i-1)
	}
	add("alias-bomb-merge", merge.String()+"jobs: [*m11]\n")
	add("alias-self", "a: &a [*a,*a,*a,*a]\n"+hostileJob)
	add("alias-undefined", "jobs: [*nope]\n")
	// nesting 10 000 deep: flow sequences, flow mappings, block sequences
	add("deep-flow-seq", "description: "+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+"\n"+hostileJob)
	add("deep-flow-map", "description: "+strings.Repeat("{a: ", 10000)+"1"+strings.Repeat("}", 10000)+"\n"+hostileJob)
	add("deep-block-seq", "jobs:\n"+strings.Repeat("- ", 10000)+"x\n")
	add("deep-block-map", func() string {
		var b strings.Builder
		for i := range 1000 { // 1000 levels of 2-space indentation: ~1 MB
			b.WriteString(strings.Repeat("  ", i) + "a:\n")
		}
		return b.String()
	}())
	// integers out of range, non-integers, non-numbers
	for _, v := range []string{"1e18", "-3", ".nan", ".inf", "-.inf", "2.5", "99999999999999999999999", "0x7fffffffffffffff", "0b1", "\"4\"", "[4]", "{n: 4}", "null", "~"} {
		add("workers-"+corpusName(v), hostileTiny+"jobs:\n  - {name: a, model: resnet50, workers: "+v+", iterations: 1}\n")
	}
	for _, f := range []string{"queue_packets: 1e18", "queue_packets: 9223372036854775807", "queue_packets: -1", "hosts: 1e18", "hosts: .nan",
		"link_gbps: .nan", "link_gbps: .inf", "link_gbps: 1e-300", "link_gbps: -0.0", "link_delay: 9999999999h", "link_delay: -1s", "link_delay: .nan",
		"switch: {slots: 1e18}", "switch: {values_per_packet: 1e9}", "switch: {pass_time: 1e300s}", "ps: {count: 1e18, placement: shared}",
		"ps: {cpu: {cores: 1e18, per_packet: 1us}}", "ps: {cpu: {cores: 1, gbps_per_core: .inf}}"} {
		add("topology-"+corpusName(f), "topology: {"+f+"}\n"+hostileJob)
	}
	for _, f := range []string{"comm_ratio: 1e-300", "comm_ratio: .nan", "comm_ratio: .inf", "comm_ratio: 1e300", "bucket_mib: 1e-6", "bucket_mib: 1e-300",
		"bucket_mib: .nan", "bucket_mib: .inf", "arrival: -1s", "arrival: 9223372036854775807ns", "priority: 1e18"} {
		add("job-"+corpusName(f), hostileTiny+"jobs:\n  - {name: a, model: vgg16, workers: 2, iterations: 1, "+f+"}\n")
	}
	for _, f := range []string{"iterations: 1e18", "iterations: 0", "iterations: 1000001", "iterations: 1e6"} {
		add("job-"+corpusName(f), hostileTiny+"jobs:\n  - {name: a, model: resnet50, workers: 2, "+f+"}\n")
	}
	// a model without layers cut into buckets of a byte: 2^40 of them
	flat := "models: [{name: flat, gradient_mib: 1048576, compute_ms: 1}]\n" + hostileTiny
	add("buckets-of-a-byte", flat+"jobs:\n  - {name: a, model: flat, workers: 2, iterations: 1, bucket_mib: 0.000001}\n")
	add("buckets-1e6", flat+"jobs:\n  - {name: a, model: flat, workers: 2, iterations: 1, bucket_mib: 1}\n")
	for _, f := range []string{"tensor_scale: 1e-300", "rate_scale: 1e-300", "tensor_scale: .nan", "rate_scale: .inf", "tensor_scale: -1", "rate_scale: 0"} {
		add("scaling-"+corpusName(f), "scaling: {"+f+"}\n"+hostileJob)
	}
	for _, f := range []string{"seed: -1", "seed: 1e30", "seed: .nan", "time_limit: 1ns", "time_limit: 0", "time_limit: -1h", "time_limit: 2562047h47m16.854775807s",
		"time_limit: 2562048h", "policy: \"\"", "name: \"\\0\""} {
		add("top-"+corpusName(f), f+"\n"+hostileTiny+hostileJob)
	}
	add("top-name-long", "name: "+strings.Repeat("n", 10000)+"\n"+hostileTiny+hostileJob)
	// heavy: a million iterations of 32 workers; 32 and 8 workers of a
	// large model at full scale; the most jobs a generator makes; one just
	// over the all-reduce limit; a million iterations of 2 workers (valid)
	add("iterations-1e6-workers-32", hostileTiny+"jobs:\n  - {name: a, model: resnet50, workers: 32, iterations: 1000000}\n")
	add("iterations-1e6-workers-5", hostileTiny+"jobs:\n  - {name: a, model: resnet50, workers: 4, iterations: 1000000}\n  - {name: b, model: resnet50, workers: 1, iterations: 1}\n")
	add("iterations-1e6-workers-2", hostileTiny+"jobs:\n  - {name: a, model: resnet50, workers: 2, iterations: 1000000}\n")
	add("full-scale-bert-32", "jobs:\n  - {name: a, model: bert-large, workers: 32, iterations: 1000000}\n")
	add("full-scale-vgg16-8", "jobs:\n  - {name: a, model: vgg16, workers: 8, iterations: 1}\n")
	add("arrivals-1000-jobs", "scaling: {tensor_scale: 0.0001, rate_scale: 0.001}\ntopology: {ps: {placement: shared, count: 1}, hosts: 32}\n"+
		"arrivals: {process: poisson, jobs: 1000, mean_interarrival: 1ns, models: [resnet50], workers: [32], iterations: [1000000]}\n")
	// models of the scenario's own, out of every range
	for _, m := range []string{"gradient_mib: 1e300, compute_ms: 1", "gradient_mib: 1e15, compute_ms: 1", "gradient_mib: 1, compute_ms: 1e300",
		"gradient_mib: .nan, compute_ms: 1", "gradient_mib: 1, compute_ms: 1, layers: [{params: 9223372036854775807, forward_us: 1, backward_us: 1}, {params: 9223372036854775807, forward_us: 1, backward_us: 1}]"} {
		add("model-"+corpusName(m), "models: [{name: m, "+m+"}]\n"+hostileTiny+"jobs:\n  - {name: a, model: m, workers: 2, iterations: 1, bucket_mib: 0.001}\n")
	}
	// files a scenario names: devices, directories, itself
	add("trace-dev-zero", "arrivals: {process: trace, trace: /dev/zero}\n")
	add("trace-dir", "arrivals: {process: trace, trace: /}\n")
	add("trace-missing", "arrivals: {process: trace, trace: /nonexistent/trace.csv}\n")
	add("models-file-dev-urandom", "models_file: /dev/urandom\n"+hostileJob)
	// documents and keys
	add("second-document", hostileJob+"---\n"+hostileJob)
	add("second-document-garbage", hostileJob+"--- [\n")
	add("duplicate-key", "seed: 1\nseed: 2\n"+hostileJob)
	add("duplicate-hostileJob-key", "jobs:\n  - {name: a, name: b, model: resnet50, workers: 2, iterations: 1}\n")
	add("empty", "")
	add("only-comment", "# nothing\n")
	add("document-marker", "---\n")
	add("null", "null\n")
	add("scalar", "hello\n")
	add("sequence", "[1, 2, 3]\n")
	add("nul-bytes", "jobs:\x00\x00\n")
	add("invalid-utf8", "name: \xff\xfe\n"+hostileJob)
	add("bom", "\ufeff"+hostileTiny+hostileJob)
	add("tab-indent", "jobs:\n\t- {name: a}\n")
	add("custom-tag", "jobs: !!binary AAAA\n")
	var jobs strings.Builder
	for i := range 200 {
		fmt.Fprintf(&jobs, "  - {name: a%d, model: resnet50, workers: 1, iterations: 1}\n", i)
	}
	add("many-jobs-full-scale", "topology: {ps: {placement: shared}}\njobs:\n"+jobs.String())
	add("many-jobs", "scaling: {tensor_scale: 0.0001, rate_scale: 0.001}\ntopology: {ps: {placement: shared}}\njobs:\n"+jobs.String())
	add("many-jobs-same-name", "topology: {ps: {placement: shared}}\njobs:\n"+strings.Repeat("  - {name: a, model: resnet50, workers: 1, iterations: 1}\n", 200))
	add("many-faults", hostileTiny+hostileJob+"faults:\n"+strings.Repeat("  - {at: 1ms, kind: link_down, target: h0, duration: 1ms}\n", 200))
	add("many-impairments", hostileTiny+hostileJob+"impairments:\n  - {link: all, loss: 1, jitter: 1000h}\n")
	return out
}

// corpusName makes v a file name.
func corpusName(v string) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		case r == '.':
			b.WriteString("dot")
		case r == ' ' || r == ':' || r == ',' || r == '_':
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
		if b.Len() > 60 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

// corpusFile is the go test fuzz v1 encoding of a []byte input.
func corpusFile(data []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n")
}

// parseCorpusFile decodes a go test fuzz v1 file of one []byte value.
func parseCorpusFile(b []byte) ([]byte, error) {
	head, body, ok := strings.Cut(string(b), "\n")
	if !ok || head != "go test fuzz v1" {
		return nil, errors.New("not a go test fuzz v1 file")
	}
	body = strings.TrimSpace(body)
	lit, pre := strings.CutPrefix(body, "[]byte(")
	lit, suf := strings.CutSuffix(lit, ")")
	if !pre || !suf {
		return nil, fmt.Errorf("want one []byte(...) value, got %.40q", body)
	}
	s, err := strconv.Unquote(lit)
	if err != nil {
		return nil, fmt.Errorf("%.40q: %w", lit, err)
	}
	return []byte(s), nil
}

// TestHostileInputs: no scenario file crashes or hangs the loader or the
// runner. For every file of the scenario fuzz corpus, of
// testdata/scenarios/invalid and every hostile input: Parse returns within
// 2 s without a panic, an error names the file, the heap Parse leaves is
// bounded; a scenario that parses runs with its context cancelled after
// 1 s and returns within 5 s (results, ErrInterrupted or an error).
func TestHostileInputs(t *testing.T) {
	type input struct {
		name, file string // file names the source in errors
		data       []byte
	}
	var ins []input
	hostile := hostileInputs()
	if *writeCorpus {
		for _, h := range hostile {
			if len(h.data) <= maxCorpusFile {
				if err := os.WriteFile(filepath.Join(fuzzCorpus, h.name), corpusFile(h.data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	onDisk := map[string][]byte{}
	ents, err := os.ReadDir(fuzzCorpus)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(fuzzCorpus, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		data, err := parseCorpusFile(b)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		onDisk[e.Name()] = data
		ins = append(ins, input{"corpus/" + e.Name(), "corpus-" + e.Name() + ".yaml", data})
	}
	for _, h := range hostile {
		if len(h.data) > maxCorpusFile {
			ins = append(ins, input{h.name, h.name + ".yaml", h.data})
		} else if !bytes.Equal(onDisk[h.name], h.data) {
			t.Errorf("%s is not in %s as written here (go test -run TestHostileInputs ./harness/run/ -args -write-corpus writes it)", h.name, fuzzCorpus)
		}
	}
	invalid, _ := filepath.Glob("../../testdata/scenarios/invalid/*")
	for _, f := range invalid {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, input{"invalid/" + filepath.Base(f), f, b})
	}
	ins = append(ins,
		input{"2MiB", "big.yaml", append([]byte(hostileJob), bytes.Repeat([]byte("# padding\n"), 2<<20/10)...)},
		input{"just-over-limit", "over.yaml", append([]byte(hostileJob), bytes.Repeat([]byte("#"), scenario.MaxFileBytes-len(hostileJob)+1)...)},
	)
	models := scenario.DefaultModels()
	var parsed []input
	var scens []*scenario.Scenario
	var maxHeap uint64
	var maxHeapName string
	for _, in := range ins {
		type result struct {
			s    *scenario.Scenario
			err  error
			heap uint64
		}
		done := make(chan result, 1)
		go func() {
			s, heap, err := parseMeasured(in.file, in.data, models)
			done <- result{s, err, heap}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: Parse did not return within 2 s", in.name)
		}
		s, err := r.s, r.err
		if r.heap > maxHeap {
			maxHeap, maxHeapName = r.heap, in.name
		}
		if r.heap > maxParseHeap(len(in.data)) {
			t.Errorf("%s: Parse left %d MiB on the heap (%d B in), over %d MiB", in.name, r.heap>>20, len(in.data), maxParseHeap(len(in.data))>>20)
		}
		if err != nil {
			if strings.Contains(err.Error(), "PANIC: ") {
				t.Errorf("%s: %v", in.name, err)
			} else if !strings.HasPrefix(err.Error(), in.file) {
				t.Errorf("%s: the error does not name the file %s: %v", in.name, in.file, err)
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			t.Logf("%s: %.200s", in.name, first)
			continue
		}
		parsed = append(parsed, in)
		scens = append(scens, s)
	}
	t.Logf("%d inputs, %d parse; the most heap a Parse left: %d KiB (%s)", len(ins), len(parsed), maxHeap>>10, maxHeapName)
	for i, s := range scens {
		t.Run(parsed[i].name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				defer func() {
					if p := recover(); p != nil {
						done <- fmt.Errorf("panic: %v\n%s", p, debug.Stack())
					}
				}()
				_, err := Run(s, Options{Context: ctx})
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil && strings.HasPrefix(err.Error(), "panic: ") {
					t.Fatal(err)
				}
				t.Logf("returned after %v: %.200v", time.Since(start).Round(time.Millisecond), err)
			case <-time.After(30 * time.Second):
				// A hang, not a slow return: alone a cancelled run
				// returns 1.1 s after it starts; under make test's
				// load (every package at once on 2 cores) two took
				// over 5 s once in four suites (2026-12-06).
				t.Fatalf("Run did not return 30 s after it started (its context was cancelled after 1 s)")
			}
		})
	}
}

// maxParseHeap bounds the heap a Parse of n bytes may leave (with the
// collector off: all it allocated). What it allocates is bounded by the
// file's limits: at most scenario.MaxNodes YAML nodes of a few hundred
// bytes each, in the node tree, its index and the decoded scenario, and
// the bytes of a file of at most scenario.MaxFileBytes a few times over in
// the parser's buffers. The most measured is ~31 MiB, by an alias bomb cut
// off at MaxNodes; 64 MiB plus 32 B per input byte leaves room for that
// and catches anything that grows with what aliases or numbers ask for.
func maxParseHeap(n int) uint64 { return 64<<20 + 32*uint64(n) }

// parseMeasured parses data with the garbage collector off, so the heap in
// use afterwards counts everything Parse allocated (at least its peak); a
// panic is returned as an error with "PANIC: ".
func parseMeasured(file string, data []byte, models scenario.Models) (s *scenario.Scenario, heap uint64, err error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: PANIC: %v\n%s", file, p, debug.Stack())
		}
	}()
	s, err = scenario.Parse(file, data, models)
	runtime.ReadMemStats(&after)
	if after.HeapInuse > before.HeapInuse {
		heap = after.HeapInuse - before.HeapInuse
	}
	return s, heap, err
}
