package bmv2

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Program is what the STF translation needs of a BMv2 JSON program (the
// output of p4c-bm2-ss): its tables, with their keys' names and match
// kinds, and its actions' parameters.
type Program struct {
	Tables  []Table
	Actions map[int]Action // by id
}

// Table is a match-action table of the program.
type Table struct {
	Name      string // e.g. MyIngress.ina_worker
	MatchType string // the table's: exact, lpm, ternary, range
	Keys      []Key
	Actions   []int // action ids
}

// Key is one field of a table's key: its name (@name or the field's path)
// and match kind.
type Key struct {
	Name, Match string
}

// Action is an action and its runtime parameters, in order.
type Action struct {
	Name   string
	Params []string
}

// LoadProgram reads a BMv2 JSON program.
func LoadProgram(r io.Reader) (*Program, error) {
	var j struct {
		Actions []struct {
			Name        string `json:"name"`
			ID          int    `json:"id"`
			RuntimeData []struct {
				Name string `json:"name"`
			} `json:"runtime_data"`
		} `json:"actions"`
		Pipelines []struct {
			Tables []struct {
				Name      string `json:"name"`
				MatchType string `json:"match_type"`
				Key       []struct {
					Match  string          `json:"match_type"`
					Name   string          `json:"name"`
					Target json.RawMessage `json:"target"`
				} `json:"key"`
				ActionIDs []int `json:"action_ids"`
			} `json:"tables"`
		} `json:"pipelines"`
	}
	if err := json.NewDecoder(r).Decode(&j); err != nil {
		return nil, fmt.Errorf("bmv2 json: %w", err)
	}
	p := &Program{Actions: map[int]Action{}}
	for _, a := range j.Actions {
		act := Action{Name: a.Name}
		for _, d := range a.RuntimeData {
			act.Params = append(act.Params, d.Name)
		}
		p.Actions[a.ID] = act
	}
	for _, pl := range j.Pipelines {
		for _, t := range pl.Tables {
			tb := Table{Name: t.Name, MatchType: t.MatchType, Actions: t.ActionIDs}
			for _, k := range t.Key {
				name := k.Name
				if name == "" {
					var path []string
					if json.Unmarshal(k.Target, &path) == nil {
						name = strings.Join(path, ".")
					}
				}
				tb.Keys = append(tb.Keys, Key{Name: name, Match: k.Match})
			}
			p.Tables = append(p.Tables, tb)
		}
	}
	if len(p.Tables) == 0 {
		return nil, fmt.Errorf("bmv2 json: no tables")
	}
	return p, nil
}

// byName finds the one element of names equal to name or ending in
// "."+name.
func byName(kind, name string, names []string) (int, error) {
	found := -1
	for i, n := range names {
		if n == name {
			return i, nil
		}
		if strings.HasSuffix(n, "."+name) {
			if found >= 0 {
				return -1, fmt.Errorf("%s %q is ambiguous: %s or %s", kind, name, names[found], n)
			}
			found = i
		}
	}
	if found < 0 {
		return -1, fmt.Errorf("no %s %q", kind, name)
	}
	return found, nil
}

func (p *Program) table(name string) (*Table, error) {
	names := make([]string, len(p.Tables))
	for i, t := range p.Tables {
		names[i] = t.Name
	}
	i, err := byName("table", name, names)
	if err != nil {
		return nil, err
	}
	return &p.Tables[i], nil
}

func (p *Program) action(t *Table, name string) (Action, error) {
	names := make([]string, len(t.Actions))
	for i, id := range t.Actions {
		names[i] = p.Actions[id].Name
	}
	i, err := byName("action of table "+t.Name, name, names)
	if err != nil {
		return Action{}, err
	}
	return p.Actions[t.Actions[i]], nil
}

// CLI translates an add or setdefault command into a simple_switch_CLI
// command (table_add, table_set_default); any other command is passed
// through as it is.
//
//	add <table> [<prio>] <key>:<value>... <action>(<param>:<value>, ...)
//	setdefault <table> <action>(<param>:<value>, ...)
//
// Keys and parameters are named as in the program (a key by its @name);
// an lpm key may be written with '*' nibbles (0x0b****** = 0x0b000000/8)
// or as value/length, a ternary one with '*' nibbles (masked out).
func (p *Program) CLI(c Cmd) (string, error) {
	switch c.Op {
	case "add", "setdefault":
	default:
		return strings.Join(append([]string{c.Op}, c.Args...), " "), nil
	}
	t, err := p.table(c.Args[0])
	if err != nil {
		return "", err
	}
	rest := strings.Join(c.Args[1:], " ")
	open := strings.IndexByte(rest, '(')
	if open < 0 || !strings.HasSuffix(rest, ")") {
		return "", fmt.Errorf("%s: no action(...) in %q", c.Op, rest)
	}
	head := strings.Fields(rest[:open])
	if len(head) == 0 {
		return "", fmt.Errorf("%s: no action name", c.Op)
	}
	act, err := p.action(t, head[len(head)-1])
	if err != nil {
		return "", err
	}
	params, err := actionArgs(act, rest[open+1:len(rest)-1])
	if err != nil {
		return "", err
	}
	if c.Op == "setdefault" {
		if len(head) != 1 {
			return "", fmt.Errorf("setdefault takes no key: %q", rest[:open])
		}
		return strings.Join(append([]string{"table_set_default", t.Name, act.Name}, params...), " "), nil
	}
	keys := head[:len(head)-1]
	prio := ""
	if len(keys) > 0 && !strings.Contains(keys[0], ":") {
		prio, keys = keys[0], keys[1:]
		if _, err := strconv.Atoi(prio); err != nil {
			return "", fmt.Errorf("add: bad priority %q", prio)
		}
	}
	vals := make([]string, len(t.Keys))
	names := make([]string, len(t.Keys))
	for i, k := range t.Keys {
		names[i] = k.Name
		switch k.Match {
		case "lpm":
			vals[i] = "0/0"
		case "ternary":
			vals[i] = "0&&&0"
		default:
			vals[i] = "0"
		}
	}
	for _, kv := range keys {
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			return "", fmt.Errorf("add: key %q is not name:value", kv)
		}
		i, err := byName("key of table "+t.Name, k, names)
		if err != nil {
			return "", err
		}
		if vals[i], err = keyValue(t.Keys[i].Match, v); err != nil {
			return "", fmt.Errorf("add: key %s: %w", k, err)
		}
	}
	cmd := append([]string{"table_add", t.Name, act.Name}, vals...)
	cmd = append(append(cmd, "=>"), params...)
	if t.MatchType == "ternary" || t.MatchType == "range" {
		n := 0
		if prio != "" {
			n, _ = strconv.Atoi(prio)
		}
		// BMv2: a lower number wins; STF: a higher one.
		cmd = append(cmd, strconv.Itoa(10000-n))
	}
	return strings.Join(cmd, " "), nil
}

func actionArgs(a Action, s string) ([]string, error) {
	given := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			return nil, fmt.Errorf("action %s: argument %q is not name:value", a.Name, kv)
		}
		given[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	out := make([]string, 0, len(a.Params))
	for _, p := range a.Params {
		v, ok := given[p]
		if !ok {
			return nil, fmt.Errorf("action %s: no value for parameter %s", a.Name, p)
		}
		out = append(out, v)
		delete(given, p)
	}
	for k := range given {
		return nil, fmt.Errorf("action %s has no parameter %s", a.Name, k)
	}
	return out, nil
}

// keyValue is an STF key value in simple_switch_CLI's form for match kind
// m.
func keyValue(m, v string) (string, error) {
	switch m {
	case "lpm":
		if strings.Contains(v, "/") {
			return v, nil
		}
		bits := 4
		digits, ok := strings.CutPrefix(v, "0x")
		if !ok {
			if digits, ok = strings.CutPrefix(v, "0b"); !ok {
				return "", fmt.Errorf("lpm value %q: hex or binary with '*' digits, or value/length", v)
			}
			bits = 1
		}
		known := len(digits) - strings.Count(digits, "*")
		return v[:len(v)-len(digits)] + strings.ReplaceAll(digits, "*", "0") + "/" + strconv.Itoa(known*bits), nil
	case "ternary":
		digits, ok := strings.CutPrefix(v, "0x")
		if !ok {
			return "", fmt.Errorf("ternary value %q: only hex with '*' nibbles", v)
		}
		var val, mask strings.Builder
		for _, c := range digits {
			if c == '*' {
				val.WriteByte('0')
				mask.WriteByte('0')
			} else {
				val.WriteRune(c)
				mask.WriteByte('f')
			}
		}
		return "0x" + val.String() + "&&&0x" + mask.String(), nil
	}
	if strings.Contains(v, "*") {
		return "", fmt.Errorf("%q: wildcards in a %s key", v, m)
	}
	return v, nil
}
