package scenario

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/inabox/inabox/testdata"
)

// Source returns the bytes of a scenario file, or of the embedded default
// when file is "".
func Source(file string) ([]byte, error) {
	if file == "" {
		return fs.ReadFile(testdata.Scenarios, path.Join("scenarios", DefaultName))
	}
	return os.ReadFile(file)
}

var overrideStep = regexp.MustCompile(`^([a-z_]+)(?:\[([0-9]+)\])?$`)

// Override returns scenario file data with the field at p set to value, a
// YAML scalar ("46", "10us", "none"). p is dotted, with list items by
// index: "topology.software_stack.gbps", "jobs[1].workers". Mappings
// missing on the way are created; list items must exist. The result is
// checked only when it is parsed (Parse), like any file.
func Override(data []byte, p, value string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("set %s: the file is not a YAML mapping", p)
	}
	n := doc.Content[0]
	steps := strings.Split(p, ".")
	for i, st := range steps {
		m := overrideStep.FindStringSubmatch(st)
		if m == nil {
			return nil, fmt.Errorf("set %s: %q is not a field name (lower case, _, and [index] for a list item)", p, st)
		}
		at := strings.Join(append(steps[:i:i], m[1]), ".") // the field, without [index]
		last := i == len(steps)-1 && m[2] == ""
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("set %s: %s is not a mapping", p, strings.Join(steps[:i], "."))
		}
		var v *yaml.Node
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == m[1] {
				v = n.Content[k+1]
			}
		}
		if v == nil {
			if m[2] != "" {
				return nil, fmt.Errorf("set %s: %s has no list %s", p, strings.Join(steps[:i], "."), m[1])
			}
			v = &yaml.Node{Kind: yaml.MappingNode}
			if last {
				v = &yaml.Node{Kind: yaml.ScalarNode}
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: m[1]}, v)
		}
		if m[2] != "" {
			idx, _ := strconv.Atoi(m[2])
			if v.Kind != yaml.SequenceNode || idx >= len(v.Content) {
				return nil, fmt.Errorf("set %s: %s has no item %d", p, at, idx)
			}
			v = v.Content[idx]
		}
		if last {
			if v.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("set %s: the field holds a mapping or list, not a value", p)
			}
			*v = yaml.Node{Kind: yaml.ScalarNode, Value: value}
		}
		n = v
	}
	if strings.HasSuffix(p, "]") {
		return nil, fmt.Errorf("set %s: names a list item, not a field", p)
	}
	return yaml.Marshal(&doc)
}
