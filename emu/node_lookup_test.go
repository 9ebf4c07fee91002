package emu

import "testing"

func TestNodeAndLinkEnds(t *testing.T) {
	n := NewNetwork(Config{Seed: 1})
	a, b := &nopNode{}, &nopNode{}
	if err := n.AddNode("a", 2, a); err != nil {
		t.Fatal(err)
	}
	if err := n.AddNode("b", 3, b); err != nil {
		t.Fatal(err)
	}
	l, err := n.Connect("b", 2, "a", 1, LinkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ports := n.Node("b"); got != Node(b) || ports != 3 {
		t.Errorf("Node(b) = %v, %d; want b, 3", got, ports)
	}
	if got, ports := n.Node("c"); got != nil || ports != 0 {
		t.Errorf("Node(c) = %v, %d; want nil, 0", got, ports)
	}
	ea, eb := l.Ends()
	if ea != (PortRef{"b", 2}) || eb != (PortRef{"a", 1}) {
		t.Errorf("Ends = %v, %v; want b:2, a:1", ea, eb)
	}
}

type nopNode struct{}

func (*nopNode) Start(*Env)                   {}
func (*nopNode) Receive(*Env, int, []*Packet) {}
func (*nopNode) Timer(*Env, uint64)           {}
