// Package k8s writes the Kubernetes manifests of `inabox up --emit k8s`:
// one Pod and one headless Service per node of a prepared scenario (the
// switch, every PS, every worker), the scenario in a ConfigMap, a Namespace
// and a kustomization.yaml, so that `kubectl apply -k DIR` runs the
// scenario's processes on a cluster, each in its own pod, exchanging their
// frames over UDP (the udp backend of the roles). The objects are the
// Kubernetes API types (k8s.io/api/core/v1) marshalled to YAML, so they
// are well-formed by construction; names are checked with the API's own
// validation. See docs/processes.md, "On Kubernetes".
package k8s

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The ports every pod uses: a peer's one UDP port (DataPort), the switch's
// UDP port for its port K (DataPort+K), the switch's start barrier (TCP)
// and its control API (loopback only, not exposed).
const (
	DataPort    = 7000
	BarrierPort = 7100
	ControlPort = 7200
)

// ScenarioDir is where every pod mounts the ConfigMap with the scenario
// and the files it names.
const ScenarioDir = "/etc/inabox"

// Binary is the inabox executable's path in the image (the Dockerfile of
// docs/processes.md copies it there).
const Binary = "/usr/local/bin/inabox"

// Defaults of Options.
const (
	DefaultImage     = "inabox:latest"
	DefaultNamespace = "inabox"
	DefaultName      = "inabox"
)

// Labels on every object.
const (
	LabelApp       = "app.kubernetes.io/name"      // "inabox"
	LabelInstance  = "app.kubernetes.io/instance"  // Options.Name
	LabelComponent = "app.kubernetes.io/component" // switch, worker, ps
	LabelNode      = "inabox.io/node"              // the node's DNS form (w1-0)
	// AnnotationNode holds the scenario's node name as it is (w1.0).
	AnnotationNode = "inabox.io/node"
)

// Node is one process of the run: the switch, or a peer (a worker or a PS)
// on switch port SwitchPort.
type Node struct {
	Name       string // the scenario's name: switch's, w1.0, ps
	Role       string // "switch", "worker" or "ps"
	SwitchPort int    // a peer's port on the switch
}

// Input is a prepared scenario and how to deploy it.
type Input struct {
	// ScenarioFile is the scenario's file name (its base name is the
	// ConfigMap key and the file name under ScenarioDir); Scenario its
	// bytes, as they are.
	ScenarioFile string
	Scenario     []byte
	// Files are the files the scenario names (models_file, presets_file,
	// arrivals.trace), by the path the scenario gives (relative to its
	// directory), with their bytes.
	Files map[string][]byte
	// Switch is the switch; Peers are every worker and PS, one per switch
	// port.
	Switch Node
	Peers  []Node
	// Policy and Seed are the run's (every process is given them).
	Policy string
	Seed   uint64
	// Batch is the backend batch of every process (0: defaults).
	Batch int
	Options
}

// Options are the deployment's settings.
type Options struct {
	Image     string // container image with Binary (DefaultImage)
	Namespace string // Kubernetes namespace (DefaultNamespace)
	Name      string // prefix of every object's name (DefaultName)
}

// File is one manifest file.
type File struct {
	Name string
	Data []byte
}

// Kustomization is the part of kustomize's kustomization.yaml that lists
// the manifests (kustomize.config.k8s.io/v1beta1).
type Kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// KustomizationFile is the name kubectl apply -k looks for.
const KustomizationFile = "kustomization.yaml"

// maxConfigMap is the API server's limit on a ConfigMap's data.
const maxConfigMap = 1 << 20

// DNSName is name in the form Kubernetes accepts in object names and DNS
// labels: lower case, every character other than a-z, 0-9 and '-'
// replaced by '-' (w1.0 → w1-0).
func DNSName(name string) string {
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}

// ServiceName is the name of node's headless Service (its DNS name in the
// namespace) and of its Pod.
func (o Options) ServiceName(node string) string { return o.Name + "-" + DNSName(node) }

func (o *Options) fill() {
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
}

// Manifests returns the files of in's deployment: namespace.yaml (unless
// the namespace is "default"), configmap.yaml, one <node>.yaml per node
// (a Pod and its headless Service) and kustomization.yaml listing them.
func Manifests(in Input) ([]File, error) {
	in.Options.fill()
	o := in.Options
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1035Label(o.Name); len(errs) > 0 {
		return nil, fmt.Errorf("name %q: %s", o.Name, strings.Join(errs, "; "))
	}
	if o.Image == "" || strings.ContainsAny(o.Image, " \t\n") {
		return nil, fmt.Errorf("image %q: not an image reference", o.Image)
	}
	// Names: every node's Service (a DNS-1035 label: its DNS name) and Pod,
	// distinct after the DNS form.
	nodes := append([]Node{in.Switch}, in.Peers...)
	seen := map[string]string{}
	for _, n := range nodes {
		svc := o.ServiceName(n.Name)
		if errs := validation.IsDNS1035Label(svc); len(errs) > 0 {
			return nil, fmt.Errorf("node %s: name %q: %s", n.Name, svc, strings.Join(errs, "; "))
		}
		if other, ok := seen[svc]; ok {
			return nil, fmt.Errorf("nodes %s and %s both become %q", other, n.Name, svc)
		}
		seen[svc] = n.Name
	}
	cm, items, scen, err := configMap(in)
	if err != nil {
		return nil, err
	}
	var files []File
	add := func(name string, objs ...any) error {
		var b []byte
		for i, obj := range objs {
			y, err := yaml.Marshal(obj)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if i > 0 {
				b = append(b, "---\n"...)
			}
			b = append(b, y...)
		}
		files = append(files, File{Name: name, Data: b})
		return nil
	}
	if o.Namespace != "default" {
		ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: o.Namespace, Labels: map[string]string{LabelApp: "inabox"}}}
		if err := add("namespace.yaml", ns); err != nil {
			return nil, err
		}
	}
	if err := add("configmap.yaml", cm); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		pod, svc := in.pod(n, cm.Name, items, scen)
		if err := add(DNSName(n.Name)+".yaml", pod, svc); err != nil {
			return nil, err
		}
	}
	k := Kustomization{APIVersion: "kustomize.config.k8s.io/v1beta1", Kind: "Kustomization"}
	for _, f := range files {
		k.Resources = append(k.Resources, f.Name)
	}
	if err := add(KustomizationFile, k); err != nil {
		return nil, err
	}
	return files, nil
}

// configMap is the ConfigMap holding the scenario and the files it names,
// the items that put each at its path under ScenarioDir and the scenario's
// path there.
func configMap(in Input) (*corev1.ConfigMap, []corev1.KeyToPath, string, error) {
	o := in.Options
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name + "-scenario", Namespace: o.Namespace, Labels: labels(o, "", "")},
		Data:       map[string]string{}}
	var items []corev1.KeyToPath
	size := 0
	put := func(p string, b []byte) error {
		key := strings.ReplaceAll(p, "/", "_")
		if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
			return fmt.Errorf("file %q: ConfigMap key %q: %s", p, key, strings.Join(errs, "; "))
		}
		for i := 2; cm.Data[key] != "" || cm.BinaryData[key] != nil; i++ {
			key = strings.ReplaceAll(p, "/", "_") + "." + strconv.Itoa(i)
		}
		// Text as data, anything else (not valid UTF-8) as binaryData.
		if s := string(b); strings.ToValidUTF8(s, "\uFFFD") == s {
			cm.Data[key] = s
		} else {
			if cm.BinaryData == nil {
				cm.BinaryData = map[string][]byte{}
			}
			cm.BinaryData[key] = b
		}
		items = append(items, corev1.KeyToPath{Key: key, Path: p})
		size += len(key) + len(b)
		return nil
	}
	scen := path.Base(filepath.ToSlash(in.ScenarioFile))
	if scen == "" || scen == "." || scen == "/" {
		scen = "scenario.yaml"
	}
	if err := put(scen, in.Scenario); err != nil {
		return nil, nil, "", err
	}
	var names []string
	for p := range in.Files {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		rel, err := relPath(p)
		if err != nil {
			return nil, nil, "", err
		}
		if rel == scen {
			return nil, nil, "", fmt.Errorf("file %q: the scenario's own name", p)
		}
		if err := put(rel, in.Files[p]); err != nil {
			return nil, nil, "", err
		}
	}
	if size > maxConfigMap {
		return nil, nil, "", fmt.Errorf("the scenario and its files are %d bytes: more than a ConfigMap holds (1 MiB)", size)
	}
	return cm, items, path.Join(ScenarioDir, scen), nil
}

// relPath is p (a path a scenario names, relative to its directory) as a
// ConfigMap volume item's path: relative, inside the directory.
func relPath(p string) (string, error) {
	s := path.Clean(filepath.ToSlash(p))
	if path.IsAbs(s) || s == ".." || strings.HasPrefix(s, "../") || s == "." {
		return "", fmt.Errorf("file %q: only a path inside the scenario's directory can go into the ConfigMap", p)
	}
	return s, nil
}

func labels(o Options, component, node string) map[string]string {
	l := map[string]string{LabelApp: "inabox", LabelInstance: o.Name}
	if component != "" {
		l[LabelComponent] = component
	}
	if node != "" {
		l[LabelNode] = DNSName(node)
	}
	return l
}

// Args returns node n's command line (after Binary): its role and flags.
func (in Input) Args(n Node, scenarioPath string) []string {
	o := in.Options
	o.fill()
	common := []string{"--scenario", scenarioPath, "--policy", in.Policy, "--seed", strconv.FormatUint(in.Seed, 10)}
	if in.Batch != 0 {
		common = append(common, "--batch", strconv.Itoa(in.Batch))
	}
	swSvc := o.ServiceName(in.Switch.Name)
	if n.Role == "switch" {
		args := append([]string{"switch"}, common...)
		for _, p := range in.Peers {
			args = append(args, "--port", fmt.Sprintf("%d=udp:0.0.0.0:%d->%s:%d", p.SwitchPort, DataPort+p.SwitchPort, o.ServiceName(p.Name), DataPort))
		}
		// --result -: the run's whole result (every peer's report sent
		// over the barrier at its end, the switch's own included) as one
		// line of the switch pod's log.
		return append(args, "--barrier-listen", ":"+strconv.Itoa(BarrierPort), "--barrier-peers", strconv.Itoa(len(in.Peers)),
			"--result", "-", "--control", "tcp:127.0.0.1:"+strconv.Itoa(ControlPort))
	}
	role := "host"
	if n.Role == "ps" {
		role = "ps"
	}
	args := append([]string{role}, common...)
	return append(args, "--node", n.Name,
		"--port", fmt.Sprintf("udp:0.0.0.0:%d->%s:%d", DataPort, swSvc, DataPort+n.SwitchPort),
		"--barrier", swSvc+":"+strconv.Itoa(BarrierPort), "--report", "-")
}

// pod returns node n's Pod and headless Service.
func (in Input) pod(n Node, cmName string, items []corev1.KeyToPath, scen string) (*corev1.Pod, *corev1.Service) {
	o := in.Options
	name := o.ServiceName(n.Name)
	lb := labels(o, n.Role, n.Name)
	meta := metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: lb, Annotations: map[string]string{AnnotationNode: n.Name}}
	var cports []corev1.ContainerPort
	var sports []corev1.ServicePort
	port := func(name string, p int, proto corev1.Protocol) {
		cports = append(cports, corev1.ContainerPort{Name: name, ContainerPort: int32(p), Protocol: proto})
		sports = append(sports, corev1.ServicePort{Name: name, Port: int32(p), TargetPort: intstr.FromInt32(int32(p)), Protocol: proto})
	}
	if n.Role == "switch" {
		for _, p := range in.Peers {
			port("p"+strconv.Itoa(p.SwitchPort), DataPort+p.SwitchPort, corev1.ProtocolUDP)
		}
		port("barrier", BarrierPort, corev1.ProtocolTCP)
	} else {
		port("data", DataPort, corev1.ProtocolUDP)
	}
	no, yes := false, true
	uid := int64(65532) // distroless's nonroot
	grace := int64(10)
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:            "inabox",
				Image:           o.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{Binary},
				Args:            in.Args(n, scen),
				Ports:           cports,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "scenario", MountPath: ScenarioDir, ReadOnly: true},
					{Name: "tmp", MountPath: "/tmp"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "scenario", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: cmName}, Items: items}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		}}
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, // headless: the name resolves to the pod's own IP
			Selector:  map[string]string{LabelInstance: o.Name, LabelNode: DNSName(n.Name)},
			Ports:     sports,
			// The peers resolve each other while they start, before any
			// is ready.
			PublishNotReadyAddresses: true,
		}}
	return pod, svc
}

// Write writes files into dir (created if missing). A file of the same name
// is replaced; a kustomization.yaml in dir that is not one of ours is not.
func Write(dir string, files []File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kf := filepath.Join(dir, KustomizationFile)
	if b, err := os.ReadFile(kf); err == nil {
		var k Kustomization
		if yaml.Unmarshal(b, &k) != nil || len(k.Resources) == 0 {
			return fmt.Errorf("%s exists and is not a kustomization this command wrote", kf)
		}
		// The manifests of an earlier emit that this one does not
		// write (a node the scenario no longer has) go.
		for _, r := range k.Resources {
			if !slices.ContainsFunc(files, func(f File) bool { return f.Name == r }) && filepath.Base(r) == r && strings.HasSuffix(r, ".yaml") {
				if err := os.Remove(filepath.Join(dir, r)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
