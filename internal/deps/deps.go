package deps

import (
	_ "github.com/gopacket/gopacket"
	_ "github.com/gopacket/gopacket/layers"
	_ "github.com/gopacket/gopacket/pcapgo"
	_ "github.com/montanaflynn/stats"
	_ "github.com/songgao/water"
	_ "github.com/vishvananda/netlink"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/net/ipv4"
	_ "golang.org/x/sys/unix"
)
