// Command p4gen writes the P4 twin of the Go switch (gen.Generate) to the
// file named by -o, ina.p4 by default. The go:generate directive in
// switch/p4/doc.go runs it from switch/p4:
//
//	go generate ./switch/p4
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/inabox/inabox/switch/p4/gen"
)

func main() {
	out := flag.String("o", "ina.p4", "output file")
	flag.Parse()
	b, err := gen.Generate()
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "p4gen:", err)
		os.Exit(1)
	}
}
