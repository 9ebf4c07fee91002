package up

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/up/k8s"
)

// EmitK8s is `inabox up --emit k8s DIR`: it prepares cfg's scenario as Up
// does (so its errors come the same way) and writes the Kubernetes
// manifests that run its processes, one pod each, into dir (package k8s).
// It runs nothing and needs no privileges. Scenario faults are refused:
// they are fired by Up's orchestrator, which has no part in a deployment.
func EmitK8s(cfg Config, opts k8s.Options, dir string, stdout io.Writer) error {
	prep, _, err := cfg.check()
	if err != nil {
		return err
	}
	s := prep.Scenario()
	if n := len(s.Faults); n > 0 {
		return fmt.Errorf("up: --emit k8s: %s has %d faults: inabox up's orchestrator fires them, and a Kubernetes deployment has none (remove them, or run inabox up)", s.Name, n)
	}
	in := k8s.Input{ScenarioFile: DefaultScenarioName, Scenario: DefaultScenario, Policy: prep.Policy(), Seed: prep.Seed(),
		Batch: cfg.Batch, Options: opts, Switch: k8s.Node{Name: prep.SwitchName(), Role: "switch"}}
	if cfg.Scenario != "" {
		if in.Scenario, err = os.ReadFile(cfg.Scenario); err != nil {
			return fmt.Errorf("up: %w", err)
		}
		in.ScenarioFile = filepath.Base(cfg.Scenario)
		if in.Files, err = scenarioFiles(cfg.Scenario, s); err != nil {
			return fmt.Errorf("up: --emit k8s: %w", err)
		}
	}
	peers, _ := prep.Peers() // checked
	for _, p := range peers {
		in.Peers = append(in.Peers, k8s.Node{Name: p.Node, Role: p.Role, SwitchPort: p.SwitchPort})
	}
	files, err := k8s.Manifests(in)
	if err != nil {
		return fmt.Errorf("up: --emit k8s: %w", err)
	}
	if err := k8s.Write(dir, files); err != nil {
		return fmt.Errorf("up: --emit k8s: %w", err)
	}
	if stdout != nil {
		fmt.Fprintf(stdout, "inabox up --emit k8s: %s (policy %s, seed %d): %d pods in namespace %s, image %s: %s\n",
			s.Name, prep.Policy(), prep.Seed(), 1+len(peers), orDefault(opts.Namespace, k8s.DefaultNamespace), orDefault(opts.Image, k8s.DefaultImage), dir)
		fmt.Fprintf(stdout, "  kubectl apply -k %s; kubectl -n %s logs -f %s (each pod prints its report, one JSON line); kubectl delete -k %s\n",
			dir, orDefault(opts.Namespace, k8s.DefaultNamespace), (&k8s.Options{Name: orDefault(opts.Name, k8s.DefaultName)}).ServiceName(peers[len(peers)-1].Node), dir)
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// scenarioFiles reads the files scenario s (loaded from file) names —
// models_file, presets_file, arrivals.trace — by the paths it gives them
// (relative to its directory, where every process finds them too). A path
// outside the directory cannot be put beside the scenario in the
// ConfigMap: that is an error naming the field.
func scenarioFiles(file string, s *scenario.Scenario) (map[string][]byte, error) {
	fields := map[string]string{"models_file": s.ModelsFile, "presets_file": s.PresetsFile}
	if s.Arrivals != nil && s.Arrivals.Process == scenario.ArrivalsTrace {
		fields["arrivals.trace"] = s.Arrivals.Trace
	}
	out := map[string][]byte{}
	for _, field := range []string{"models_file", "presets_file", "arrivals.trace"} {
		p := fields[field]
		if p == "" {
			continue
		}
		rel := filepath.Clean(p)
		if filepath.IsAbs(rel) || rel == ".." || len(rel) > 2 && rel[:3] == ".."+string(filepath.Separator) {
			return nil, fmt.Errorf("%s: %s: %q is outside the scenario's directory: copy it there and name it relative to it, so it can go beside the scenario into the ConfigMap", s.File(), field, p)
		}
		b, err := os.ReadFile(filepath.Join(filepath.Dir(file), rel))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", s.File(), field, err)
		}
		out[p] = b
	}
	return out, nil
}

// emitFlags registers --emit and the settings of the deployment it writes.
func emitFlags(fs *flag.FlagSet, f *cliFlags) {
	fs.StringVar(&f.emit, "emit", "", "write the deployment in `FORMAT` (k8s: Kubernetes manifests) into DIR, the first argument (inabox up --emit k8s DIR [scenario.yaml]), and run nothing")
	fs.StringVar(&f.k8s.Image, "image", k8s.DefaultImage, "with --emit k8s: the container image with inabox at "+k8s.Binary)
	fs.StringVar(&f.k8s.Namespace, "k8s-namespace", k8s.DefaultNamespace, "with --emit k8s: the Kubernetes namespace")
	fs.StringVar(&f.k8s.Name, "name", k8s.DefaultName, "with --emit k8s: the prefix of every object's name (pods and services NAME-switch, NAME-w1-0, ...)")
}

// emitCommand is `inabox up --emit FORMAT DIR [scenario.yaml]`.
func (f *cliFlags) emitCommand(positional []string, stdout io.Writer) error {
	if f.emit != "k8s" {
		return fmt.Errorf("inabox up: --emit %q: the one format is k8s", f.emit)
	}
	if len(positional) == 0 || len(positional) > 2 {
		return fmt.Errorf("inabox up --emit k8s: want DIR [scenario.yaml], got %d arguments", len(positional))
	}
	for name, set := range map[string]bool{"--hold": f.cfg.Hold, "--pcap": f.cfg.PcapDir != "", "--profile": f.cfg.ProfileDir != "", "--json": f.json != "", "--keep": f.cfg.KeepWorkDir} {
		if set {
			return fmt.Errorf("inabox up --emit k8s: %s applies to a run, and --emit runs nothing", name)
		}
	}
	dir := positional[0]
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("inabox up --emit k8s %s: not a directory (the directory comes first: --emit k8s DIR [scenario.yaml])", dir)
	}
	cfg := f.cfg
	if len(positional) == 2 {
		cfg.Scenario = positional[1]
	}
	return EmitK8s(cfg, f.k8s, dir, stdout)
}
