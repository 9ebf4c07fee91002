package k8s_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/inabox/inabox/harness/run"
	"github.com/inabox/inabox/harness/scenario"
	"github.com/inabox/inabox/harness/up"
	"github.com/inabox/inabox/harness/up/k8s"
)

// manifests is what a directory written by --emit k8s holds, decoded
// strictly into the API types.
type manifests struct {
	ns       *corev1.Namespace
	cm       *corev1.ConfigMap
	pods     map[string]*corev1.Pod     // by the node annotation (w1.0)
	services map[string]*corev1.Service // by the node annotation
	files    map[string]string          // the pod's file by node
}

// load reads dir: kustomization.yaml must list exactly the other files,
// and every document of every file must decode strictly (no unknown or
// misspelt field) into its kind's type.
func load(t *testing.T, dir string) manifests {
	t.Helper()
	var k k8s.Kustomization
	b, err := os.ReadFile(filepath.Join(dir, k8s.KustomizationFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: %s %s", k.APIVersion, k.Kind)
	}
	ents, _ := os.ReadDir(dir)
	var have []string
	for _, e := range ents {
		if e.Name() != k8s.KustomizationFile {
			have = append(have, e.Name())
		}
	}
	listed := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(have, listed) {
		t.Errorf("kustomization.yaml lists %v, the directory has %v", listed, have)
	}
	m := manifests{pods: map[string]*corev1.Pod{}, services: map[string]*corev1.Service{}, files: map[string]string{}}
	for _, name := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(b), "\n---\n") {
			where := fmt.Sprintf("%s, document %d", name, i+1)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var obj metav1.Object
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 Namespace":
				m.ns = new(corev1.Namespace)
				obj = m.ns
			case "v1 ConfigMap":
				m.cm = new(corev1.ConfigMap)
				obj = m.cm
			case "v1 Pod":
				obj = new(corev1.Pod)
			case "v1 Service":
				obj = new(corev1.Service)
			default:
				t.Fatalf("%s: unexpected %s %s", where, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s: strict decoding into %s: %v", where, tm.Kind, err)
			}
			checkMeta(t, where, tm.Kind, obj)
			node := obj.GetAnnotations()[k8s.AnnotationNode]
			switch o := obj.(type) {
			case *corev1.Pod:
				if m.pods[node] != nil {
					t.Errorf("%s: a second pod of node %q", where, node)
				}
				m.pods[node], m.files[node] = o, name
			case *corev1.Service:
				if m.services[node] != nil {
					t.Errorf("%s: a second service of node %q", where, node)
				}
				m.services[node] = o
			}
		}
	}
	return m
}

// checkMeta: names and labels are valid as the API server checks them.
func checkMeta(t *testing.T, where, kind string, obj metav1.Object) {
	t.Helper()
	name := obj.GetName()
	var errs []string
	switch kind {
	case "Service", "Namespace":
		errs = validation.IsDNS1035Label(name)
	default:
		errs = validation.IsDNS1123Subdomain(name)
	}
	if len(errs) > 0 {
		t.Errorf("%s: name %q: %v", where, name, errs)
	}
	if el := metavalidation.ValidateLabels(obj.GetLabels(), field.NewPath("metadata", "labels")); len(el) > 0 {
		t.Errorf("%s: %v", where, el.ToAggregate())
	}
	if obj.GetLabels()[k8s.LabelApp] != "inabox" {
		t.Errorf("%s: labels %v", where, obj.GetLabels())
	}
	if kind != "Namespace" && obj.GetNamespace() == "" {
		t.Errorf("%s: no namespace", where)
	}
}

// flagValues returns the values of every --name in args.
func flagValues(args []string, name string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--"+name {
			out = append(out, args[i+1])
		}
	}
	return out
}

func prepare(t *testing.T, file string) (*run.Prepared, []run.Peer) {
	t.Helper()
	var s *scenario.Scenario
	var err error
	if file == "" {
		s, err = scenario.Parse(up.DefaultScenarioName, up.DefaultScenario, scenario.DefaultModels())
	} else {
		s, err = scenario.Load(file)
	}
	if err != nil {
		t.Fatal(err)
	}
	prep, err := run.Prepare(s, run.Options{Realtime: true})
	if err != nil {
		t.Fatal(err)
	}
	peers, err := prep.Peers()
	if err != nil {
		t.Fatal(err)
	}
	return prep, peers
}

// TestEmitK8s: `inabox up --emit k8s DIR` writes one pod and one headless
// service per node of the prepared scenario, the scenario (and the files it
// names) in a ConfigMap every pod mounts, and each pod's command line names
// its peer's service and port for every link; every file decodes strictly
// into the Kubernetes API types.
func TestEmitK8s(t *testing.T) {
	for _, tc := range []struct{ name, file string }{
		{"default", ""},
		{"16mb", "../testdata/up-16mb.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			args := []string{"--emit", "k8s", "--image", "registry.example/inabox:v1", "--k8s-namespace", "ina-test", dir}
			if tc.file != "" {
				args = append(args, tc.file)
			}
			var out bytes.Buffer
			if err := up.Command(t.Context(), args, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "kubectl apply -k "+dir) {
				t.Errorf("output:\n%s", out.String())
			}
			prep, peers := prepare(t, tc.file)
			checkDeployment(t, load(t, dir), prep, peers, "ina-test", "registry.example/inabox:v1")
		})
	}
}

func checkDeployment(t *testing.T, m manifests, prep *run.Prepared, peers []run.Peer, ns, image string) {
	t.Helper()
	o := k8s.Options{Name: k8s.DefaultName}
	if m.ns == nil || m.ns.Name != ns {
		t.Errorf("namespace: %+v", m.ns)
	}
	if m.cm == nil {
		t.Fatal("no ConfigMap")
	}
	swName := prep.SwitchName()
	if len(m.pods) != 1+len(peers) || len(m.services) != 1+len(peers) {
		t.Errorf("%d pods, %d services for %d peers and the switch", len(m.pods), len(m.services), len(peers))
	}
	for node, pod := range m.pods {
		svc := m.services[node]
		if svc == nil {
			t.Errorf("pod %s has no service", pod.Name)
			continue
		}
		if pod.Name != o.ServiceName(node) || svc.Name != pod.Name || pod.Namespace != ns || svc.Namespace != ns {
			t.Errorf("node %s: pod %s/%s, service %s/%s", node, pod.Namespace, pod.Name, svc.Namespace, svc.Name)
		}
		if m.files[node] != k8s.DNSName(node)+".yaml" {
			t.Errorf("node %s in %s", node, m.files[node])
		}
		// The headless service selects exactly its pod.
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
			t.Errorf("service %s: clusterIP %q, publishNotReadyAddresses %v", svc.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
		}
		for k, v := range svc.Spec.Selector {
			if pod.Labels[k] != v {
				t.Errorf("service %s selects %s=%s, pod %s has %q", svc.Name, k, v, pod.Name, pod.Labels[k])
			}
		}
		for other, p := range m.pods {
			if other == node {
				continue
			}
			sel := true
			for k, v := range svc.Spec.Selector {
				sel = sel && p.Labels[k] == v
			}
			if sel {
				t.Errorf("service %s selects pod %s too", svc.Name, p.Name)
			}
		}
		spec := pod.Spec
		if spec.RestartPolicy != corev1.RestartPolicyNever || len(spec.Containers) != 1 {
			t.Fatalf("pod %s: restart %s, %d containers", pod.Name, spec.RestartPolicy, len(spec.Containers))
		}
		c := spec.Containers[0]
		if c.Image != image || !slices.Equal(c.Command, []string{k8s.Binary}) {
			t.Errorf("pod %s: image %s, command %v", pod.Name, c.Image, c.Command)
		}
		// No capability, no root: UDP sockets need neither.
		sc := c.SecurityContext
		if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 ||
			spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
			t.Errorf("pod %s: security context %+v / %+v", pod.Name, sc, spec.SecurityContext)
		}
		// Mounts: the ConfigMap at ScenarioDir (items: the scenario and its
		// files at their paths), an emptyDir at /tmp.
		vols := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			vols[v.Name] = v
		}
		mounted := map[string]string{}
		for _, vm := range c.VolumeMounts {
			v, ok := vols[vm.Name]
			switch {
			case !ok:
				t.Errorf("pod %s mounts unknown volume %s", pod.Name, vm.Name)
			case v.ConfigMap != nil:
				if v.ConfigMap.Name != m.cm.Name || !vm.ReadOnly {
					t.Errorf("pod %s: ConfigMap volume %+v at %s", pod.Name, v.ConfigMap, vm.MountPath)
				}
				for _, it := range v.ConfigMap.Items {
					if _, ok := m.cm.Data[it.Key]; !ok {
						t.Errorf("pod %s: item %s not in the ConfigMap", pod.Name, it.Key)
					}
					mounted[path.Join(vm.MountPath, it.Path)] = it.Key
				}
				if len(v.ConfigMap.Items) != len(m.cm.Data)+len(m.cm.BinaryData) {
					t.Errorf("pod %s: %d items for %d keys", pod.Name, len(v.ConfigMap.Items), len(m.cm.Data))
				}
			case v.EmptyDir != nil:
				if vm.MountPath != "/tmp" {
					t.Errorf("pod %s: emptyDir at %s", pod.Name, vm.MountPath)
				}
			}
		}
		scen := flagValues(c.Args, "scenario")
		if len(scen) != 1 || mounted[scen[0]] == "" {
			t.Errorf("pod %s: --scenario %v, mounted %v", pod.Name, scen, mounted)
		}
		if p := flagValues(c.Args, "policy"); len(p) != 1 || p[0] != prep.Policy() {
			t.Errorf("pod %s: --policy %v, want %s", pod.Name, p, prep.Policy())
		}
		// A peer's log has its report; the switch's the run's result,
		// built from every report (the barrier's end phase).
		want, other := "report", "result"
		if pod.Labels[k8s.LabelComponent] == "switch" {
			want, other = "result", "report"
		}
		if r := flagValues(c.Args, want); !slices.Equal(r, []string{"-"}) {
			t.Errorf("pod %s: --%s %v, want -", pod.Name, want, r)
		}
		if r := flagValues(c.Args, other); len(r) > 0 {
			t.Errorf("pod %s: --%s %v: one JSON line a log", pod.Name, other, r)
		}
		// Container and service ports agree.
		if len(c.Ports) != len(svc.Spec.Ports) {
			t.Errorf("pod %s: %d ports, its service %d", pod.Name, len(c.Ports), len(svc.Spec.Ports))
		}
		for i, cp := range c.Ports {
			if errs := validation.IsValidPortName(cp.Name); len(errs) > 0 {
				t.Errorf("pod %s: port name %q: %v", pod.Name, cp.Name, errs)
			}
			if i < len(svc.Spec.Ports) {
				sp := svc.Spec.Ports[i]
				if sp.Name != cp.Name || sp.Port != cp.ContainerPort || sp.TargetPort.IntValue() != int(cp.ContainerPort) || sp.Protocol != cp.Protocol {
					t.Errorf("pod %s: port %+v, service %+v", pod.Name, cp, sp)
				}
			}
		}
	}
	// Every link: the switch's port K sends to the peer's service on 7000
	// from 7000+K, the peer sends to the switch's service on 7000+K.
	swp := m.pods[swName]
	if swp == nil {
		t.Fatalf("no switch pod (node %q)", swName)
	}
	swc := swp.Spec.Containers[0]
	swSvc := o.ServiceName(swName)
	if swc.Args[0] != "switch" {
		t.Errorf("switch pod runs %v", swc.Args)
	}
	swPorts := flagValues(swc.Args, "port")
	if len(swPorts) != len(peers) {
		t.Errorf("switch: %d --port for %d peers", len(swPorts), len(peers))
	}
	udp := map[int32]corev1.Protocol{}
	for _, cp := range swc.Ports {
		udp[cp.ContainerPort] = cp.Protocol
	}
	if udp[k8s.BarrierPort] != corev1.ProtocolTCP {
		t.Errorf("switch: barrier port %d not TCP: %v", k8s.BarrierPort, swc.Ports)
	}
	if v := flagValues(swc.Args, "barrier-peers"); !slices.Equal(v, []string{fmt.Sprint(len(peers))}) {
		t.Errorf("switch: --barrier-peers %v, want %d", v, len(peers))
	}
	if v := flagValues(swc.Args, "barrier-listen"); !slices.Equal(v, []string{fmt.Sprintf(":%d", k8s.BarrierPort)}) {
		t.Errorf("switch: --barrier-listen %v", v)
	}
	if v := flagValues(swc.Args, "control"); len(v) != 1 || !strings.HasPrefix(v[0], "tcp:127.0.0.1:") {
		t.Errorf("switch: --control %v", v)
	}
	for _, pe := range peers {
		want := fmt.Sprintf("%d=udp:0.0.0.0:%d->%s:%d", pe.SwitchPort, k8s.DataPort+pe.SwitchPort, o.ServiceName(pe.Node), k8s.DataPort)
		if !slices.Contains(swPorts, want) {
			t.Errorf("switch: no --port %s in %v", want, swPorts)
		}
		if udp[int32(k8s.DataPort+pe.SwitchPort)] != corev1.ProtocolUDP {
			t.Errorf("switch: port %d not a UDP container port", k8s.DataPort+pe.SwitchPort)
		}
		pod := m.pods[pe.Node]
		if pod == nil {
			t.Errorf("no pod for %s", pe.Node)
			continue
		}
		c := pod.Spec.Containers[0]
		role := map[string]string{"worker": "host", "ps": "ps"}[pe.Role]
		if c.Args[0] != role || pod.Labels[k8s.LabelComponent] != pe.Role {
			t.Errorf("%s: runs %q, component %q; want %s (%s)", pe.Node, c.Args[0], pod.Labels[k8s.LabelComponent], role, pe.Role)
		}
		if v := flagValues(c.Args, "node"); !slices.Equal(v, []string{pe.Node}) {
			t.Errorf("%s: --node %v", pe.Node, v)
		}
		if v, w := flagValues(c.Args, "port"), fmt.Sprintf("udp:0.0.0.0:%d->%s:%d", k8s.DataPort, swSvc, k8s.DataPort+pe.SwitchPort); !slices.Equal(v, []string{w}) {
			t.Errorf("%s: --port %v, want %s", pe.Node, v, w)
		}
		if v, w := flagValues(c.Args, "barrier"), fmt.Sprintf("%s:%d", swSvc, k8s.BarrierPort); !slices.Equal(v, []string{w}) {
			t.Errorf("%s: --barrier %v, want %s", pe.Node, v, w)
		}
		if len(c.Ports) != 1 || c.Ports[0].ContainerPort != k8s.DataPort || c.Ports[0].Protocol != corev1.ProtocolUDP {
			t.Errorf("%s: ports %+v", pe.Node, c.Ports)
		}
	}
}

// TestEmitK8sArgsParse: every pod's command line is one its role accepts
// (the role's own flag set, as `inabox switch|host|ps` parses it).
// That includes the switch's --result, which needs --barrier-listen and
// --scenario (checked after parsing, in openBarrier: here by the flags'
// presence).
func TestEmitK8sArgsParse(t *testing.T) {
	dir := t.TempDir()
	if err := up.Command(t.Context(), []string{"--emit", "k8s", dir, "../testdata/up-16mb.yaml"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	m := load(t, dir)
	for node, pod := range m.pods {
		args := pod.Spec.Containers[0].Args
		var fs *flag.FlagSet
		switch args[0] {
		case "switch":
			fs = up.SwitchFlagSet()
		case "host":
			fs = up.HostFlagSet()
		case "ps":
			fs = up.PSFlagSet()
		default:
			t.Fatalf("%s: role %q", node, args[0])
		}
		var msg bytes.Buffer
		fs.SetOutput(&msg)
		if err := fs.Parse(args[1:]); err != nil {
			t.Errorf("%s: inabox %s does not take its pod's command line: %v", node, args[0], err)
			continue
		}
		if fs.NArg() > 0 {
			t.Errorf("%s: arguments left over: %v", node, fs.Args())
		}
		if args[0] == "switch" && (fs.Lookup("result").Value.String() != "-" || fs.Lookup("barrier-listen").Value.String() == "" || fs.Lookup("scenario").Value.String() == "") {
			t.Errorf("switch: --result %q needs --barrier-listen and --scenario: %v", fs.Lookup("result").Value, args)
		}
	}
}

// TestEmitK8sFiles: the files a scenario names go into the ConfigMap at
// their paths relative to it; one outside its directory, faults and a
// name Kubernetes cannot take are refused, each error saying what.
func TestEmitK8sFiles(t *testing.T) {
	src, err := os.ReadFile("../testdata/up-16mb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("site/presets.yaml", "slow-ish: {jitter: 1us}\n")
	scen := write("s.yaml", string(src)+"presets_file: site/presets.yaml\nimpairments:\n  - {link: h0, preset: slow-ish}\n")
	out := filepath.Join(dir, "out")
	if err := up.Command(t.Context(), []string{"--emit", "k8s", out, scen}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	m := load(t, out)
	if m.cm.Data["s.yaml"] != string(src)+"presets_file: site/presets.yaml\nimpairments:\n  - {link: h0, preset: slow-ish}\n" {
		t.Errorf("the scenario in the ConfigMap differs from its file")
	}
	if m.cm.Data["site_presets.yaml"] != "slow-ish: {jitter: 1us}\n" {
		t.Errorf("ConfigMap keys %v: no site_presets.yaml", slices.Sorted(func(yield func(string) bool) {
			for k := range m.cm.Data {
				if !yield(k) {
					return
				}
			}
		}))
	}
	for _, v := range m.pods["w1.0"].Spec.Volumes {
		if v.ConfigMap != nil && !slices.Contains(v.ConfigMap.Items, corev1.KeyToPath{Key: "site_presets.yaml", Path: "site/presets.yaml"}) {
			t.Errorf("items %v: the presets file not at site/presets.yaml", v.ConfigMap.Items)
		}
	}
	// A second emit into the same directory replaces the files.
	if err := up.Command(t.Context(), []string{"--emit", "k8s", "--name", "other", out, scen}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if m := load(t, out); m.pods["switch"] == nil || m.pods["switch"].Name != "other-switch" {
		t.Errorf("after a second emit: switch pod %+v", m.pods["switch"])
	}

	outside := write("sub/s.yaml", string(src)+"presets_file: ../site/presets.yaml\n")
	abs := write("abs.yaml", string(src)+"presets_file: "+filepath.Join(dir, "site/presets.yaml")+"\n")
	faults := write("faults.yaml", string(src)+"faults:\n  - {kind: link_down, target: h0, at: 10ms, duration: 5ms}\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{outside}, `presets_file: "../site/presets.yaml" is outside the scenario's directory`},
		{[]string{abs}, "presets_file: " + fmt.Sprintf("%q", filepath.Join(dir, "site/presets.yaml")) + " is outside"},
		{[]string{faults}, "has 1 faults"},
		{[]string{"--name", "9lives", scen}, `name "9lives"`},
		{[]string{"--k8s-namespace", "No_Such", scen}, `namespace "No_Such"`},
		{[]string{"--image", "in a box", scen}, `image "in a box"`},
	} {
		args := append([]string{"--emit", "k8s", filepath.Join(dir, "bad")}, c.args...)
		err := up.Command(t.Context(), args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--emit", "helm", out}, "the one format is k8s"},
		{[]string{"--emit", "k8s"}, "want DIR"},
		{[]string{"--emit", "k8s", scen}, "not a directory"},
		{[]string{"--emit", "k8s", out, scen, scen}, "want DIR"},
	} {
		err := up.Command(t.Context(), c.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

func TestDNSName(t *testing.T) {
	for in, want := range map[string]string{"w1.0": "w1-0", "ps": "ps", "W2_3": "w2-3", "switch": "switch"} {
		if got := k8s.DNSName(in); got != want {
			t.Errorf("DNSName(%q) = %q, want %q", in, got, want)
		}
	}
	_, err := k8s.Manifests(k8s.Input{Scenario: []byte("x"), Switch: k8s.Node{Name: "switch", Role: "switch"},
		Peers: []k8s.Node{{Name: "w1.0", Role: "worker"}, {Name: "w1-0", Role: "worker", SwitchPort: 1}}})
	if err == nil || !strings.Contains(err.Error(), `nodes w1.0 and w1-0 both become "inabox-w1-0"`) {
		t.Errorf("colliding names: %v", err)
	}
}
