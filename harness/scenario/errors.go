package scenario

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FieldError is one problem in a scenario file, naming the field by its YAML
// path, e.g. "scenario.yaml:14: jobs[2].workers: 0: must be between 1 and 32".
type FieldError struct {
	File  string
	Line  int    // 0 if unknown
	Path  string // e.g. jobs[2].workers
	Value string // the offending value as written; empty if none
	Rule  string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Path != "" {
		b.WriteString(": " + e.Path)
	}
	if e.Value != "" {
		b.WriteString(": " + e.Value)
	}
	b.WriteString(": " + e.Rule)
	return b.String()
}

// Error lists every problem found in a scenario file, in file order.
type Error struct {
	Errs []*FieldError
}

func (e *Error) Error() string {
	s := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		s[i] = fe.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the field errors.
func (e *Error) Unwrap() []error {
	out := make([]error, len(e.Errs))
	for i, fe := range e.Errs {
		out[i] = fe
	}
	return out
}

// nodeIndex maps YAML paths ("jobs[2].workers") to their nodes.
type nodeIndex struct {
	keys   map[string]*yaml.Node // the key node of a mapping entry
	values map[string]*yaml.Node
	order  []string
	// budget is how many more nodes the walk may visit (aliases
	// included); over is the path where it ran out or nesting went too
	// deep, and why.
	budget    int
	over, why string
}

// The bounds of a scenario file: its size, the nodes it may expand to
// (aliases count each time they are used) and how deep it may nest.
const (
	MaxFileBytes = 1 << 20
	MaxNodes     = 100_000
	MaxDepth     = 32
)

func newNodeIndex(root *yaml.Node) *nodeIndex {
	idx := &nodeIndex{keys: map[string]*yaml.Node{}, values: map[string]*yaml.Node{}, budget: MaxNodes}
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		idx.walk("", nil, root.Content[0], 0)
	}
	return idx
}

func (x *nodeIndex) walk(p string, key, n *yaml.Node, depth int) {
	if x.over != "" {
		return
	}
	if x.budget--; x.budget < 0 {
		x.over, x.why = p, fmt.Sprintf("the file expands to more than %d YAML nodes (aliases count each time they are used)", MaxNodes)
		return
	}
	if depth > MaxDepth {
		x.over, x.why = p, fmt.Sprintf("nested more than %d levels deep", MaxDepth)
		return
	}
	if p != "" {
		x.keys[p], x.values[p] = key, n
		x.order = append(x.order, p)
	}
	join := func(k string) string {
		if p == "" {
			return k
		}
		return p + "." + k
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			x.walk(join(n.Content[i].Value), n.Content[i], n.Content[i+1], depth+1)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			x.walk(fmt.Sprintf("%s[%d]", p, i), nil, c, depth+1)
		}
	case yaml.AliasNode:
		if n.Alias != nil {
			x.walk(p, key, n.Alias, depth+1)
		}
	}
}

func (x *nodeIndex) has(p string) bool { _, ok := x.values[p]; return ok }

// line is the line of p, or of its closest present ancestor.
func (x *nodeIndex) line(p string) int {
	for p != "" {
		if n := x.values[p]; n != nil {
			if k := x.keys[p]; k != nil {
				return k.Line
			}
			return n.Line
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

func (x *nodeIndex) value(p string) (string, bool) {
	n := x.values[p]
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	return n.Value, true
}

var (
	reUnknown = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)
	reType    = regexp.MustCompile("^line (\\d+): cannot unmarshal (?:!!\\w+ )?`(.*)` into (.+?)(?:: (.*))?$")
	reTypeAny = regexp.MustCompile(`^line (\d+): cannot unmarshal (\S+) into (.+)$`)
)

// typeErrors converts the decoder's messages into field errors.
func (x *nodeIndex) typeErrors(file string, te *yaml.TypeError) *Error {
	out := &Error{}
	for _, msg := range te.Errors {
		fe := &FieldError{File: file, Rule: msg}
		if m := reUnknown.FindStringSubmatch(msg); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			fe.Path = x.find(fe.Line, func(p string, k, v *yaml.Node) bool { return k != nil && k.Value == m[2] })
			fe.Rule = "unknown field"
			if known := knownKeys[m[3]]; known != nil {
				fe.Rule += "; known: " + strings.Join(known, ", ")
			}
		} else if m := reType.FindStringSubmatch(msg); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			fe.Path = x.find(fe.Line, func(p string, k, v *yaml.Node) bool { return v.Kind == yaml.ScalarNode && v.Value == m[2] })
			fe.Value = m[2]
			fe.Rule = "want " + typeWord(m[3])
			if m[4] != "" {
				fe.Rule = m[4]
			}
		} else if m := reTypeAny.FindStringSubmatch(msg); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			fe.Path = x.find(fe.Line, func(p string, k, v *yaml.Node) bool { return v.Line == fe.Line && v.Tag == m[2] })
			fe.Rule = "want " + typeWord(m[3]) + ", got " + tagWord(m[2])
		}
		out.Errs = append(out.Errs, fe)
	}
	return out
}

// find returns the first path whose key or value is on line and matches.
func (x *nodeIndex) find(line int, match func(p string, k, v *yaml.Node) bool) string {
	for _, p := range x.order {
		k, v := x.keys[p], x.values[p]
		if (k != nil && k.Line == line || v.Line == line) && match(p, k, v) {
			return p
		}
	}
	return ""
}

func typeWord(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer (" + goType + ")"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "scenario."):
		return "a mapping"
	}
	return goType
}

func tagWord(tag string) string {
	switch tag {
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!str":
		return "a string"
	}
	return tag
}

// knownKeys maps the decoder's type names to their YAML keys, for "unknown
// field" errors.
var knownKeys = func() map[string][]string {
	out := map[string][]string{}
	for _, v := range []any{Scenario{}, ATP{}, ESA{}, Scaling{}, Topology{}, Switch{}, PS{}, SoftwareStack{}, HostCost{}, Job{}, Fault{}, LinkImpairment{}, BurstLoss{}, Flap{}, When{}} {
		t := reflect.TypeOf(v)
		var keys []string
		for i := 0; i < t.NumField(); i++ {
			if tag := t.Field(i).Tag.Get("yaml"); tag != "" {
				keys = append(keys, strings.Split(tag, ",")[0])
			}
		}
		out[t.String()] = keys
	}
	return out
}()

// strictInts refuses a number with a fraction or an exponent (a YAML
// float) in an integer field: YAML decoding would truncate it silently
// (workers: 2.5 became 2, 1e18 wrapped).
func (x *nodeIndex) strictInts(file string, s *Scenario) error {
	var errs []*FieldError
	for _, p := range x.order {
		n := x.values[p]
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!float" {
			continue
		}
		if k, ok := kindAt(reflect.ValueOf(s).Elem(), p); ok && isInt(k) {
			errs = append(errs, &FieldError{File: file, Line: n.Line, Path: p, Value: n.Value, Rule: "must be a whole number"})
		}
	}
	if len(errs) > 0 {
		return &Error{Errs: errs}
	}
	return nil
}

func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// kindAt is the kind of the field at YAML path p ("jobs[2].workers") in v,
// following yaml tags, or false if there is none or it decodes itself.
func kindAt(v reflect.Value, p string) (reflect.Kind, bool) {
	for _, part := range strings.Split(p, ".") {
		name, rest, _ := strings.Cut(part, "[")
		for v.Kind() == reflect.Pointer {
			v = reflect.New(v.Type().Elem()).Elem()
		}
		var f reflect.Value
		ok := false
		if v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String {
			f, ok = reflect.New(v.Type().Elem()).Elem(), true // a user's key (presets.NAME)
		} else {
			f, ok = fieldByTag(v, name)
		}
		if !ok {
			return 0, false
		}
		v = f
		for rest != "" {
			i, tail, _ := strings.Cut(rest, "]")
			k, err := strconv.Atoi(i)
			if err != nil || v.Kind() != reflect.Slice || k < 0 || k >= v.Len() {
				return 0, false
			}
			v = v.Index(k)
			rest = strings.TrimPrefix(tail, "[")
		}
	}
	for v.Kind() == reflect.Pointer {
		v = reflect.New(v.Type().Elem()).Elem()
	}
	if reflect.PointerTo(v.Type()).Implements(unmarshalerType) || v.Type().Implements(unmarshalerType) {
		return 0, false
	}
	return v.Kind(), true
}

// fieldByTag is the field of struct v whose yaml tag (or lower-cased name)
// is name.
func fieldByTag(v reflect.Value, name string) (reflect.Value, bool) {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		if tag == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}
