package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// helpWidth is the width help text is wrapped to.
const helpWidth = 80

// writeHelp writes every command's synopsis, description and flags.
func writeHelp(w io.Writer) {
	fmt.Fprint(w, "inabox runs in-network aggregation scenarios on a packet-level emulator.\n\n")
	fmt.Fprint(w, "usage: inabox COMMAND [flags] [arguments]\n\n")
	fmt.Fprint(w, wrap("Flags may come before or after the arguments; --flag and -flag are the same. "+
		"inabox help COMMAND (or inabox COMMAND -h) shows one command.", "", helpWidth))
	for i := range commands {
		c := &commands[i]
		fmt.Fprintf(w, "\n%s\n", synopsis(c))
		fmt.Fprint(w, wrap(c.doc, "    ", helpWidth))
		if fs := c.flags(); hasFlags(fs) {
			fmt.Fprintln(w)
			writeFlags(w, fs, "    ")
		}
	}
}

// writeCommandHelp writes command c's synopsis, description and flags.
func writeCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: %s\n\n", synopsis(c))
	fmt.Fprint(w, wrap(c.doc, "", helpWidth))
	fs := c.flags()
	if hasFlags(fs) {
		fmt.Fprint(w, "\nflags:\n")
	}
	writeFlags(w, fs, "  ")
}

// synopsis is "inabox NAME [flags] ARGS" (without [flags] if c has none).
func synopsis(c *command) string {
	s := "inabox " + c.name
	if hasFlags(c.flags()) {
		s += " [flags]"
	}
	if c.args != "" {
		s += " " + c.args
	}
	return s
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// writeFlags writes one entry per flag of fs, in name order: the flag, its
// value's placeholder, its usage and its default (unless the zero value),
// each line indented by indent.
func writeFlags(w io.Writer, fs *flag.FlagSet, indent string) {
	type entry struct{ left, usage string }
	var es []entry
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if name != "" {
			left += " " + placeholder(name)
		}
		if !isZeroDefault(f) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		es = append(es, entry{left, usage})
		width = max(width, utf8.RuneCountInString(left))
	})
	const maxLeft = 24 // a longer flag gets its usage on the next line
	width = min(width, maxLeft)
	for _, e := range es {
		hang := indent + strings.Repeat(" ", width+2)
		if utf8.RuneCountInString(e.left) > width {
			fmt.Fprintf(w, "%s%s\n%s", indent, e.left, wrap(e.usage, hang, helpWidth))
			continue
		}
		text := wrap(e.usage, hang, helpWidth)
		fmt.Fprintf(w, "%s%-*s  %s", indent, width, e.left, strings.TrimPrefix(text, hang))
	}
}

// placeholder is the value placeholder for flag.UnquoteUsage's name: the
// back-quoted word of the usage as written, or for a usage without one N
// for an integer and the upper-cased type name otherwise.
func placeholder(name string) string {
	switch name {
	case "int", "uint":
		return "N"
	case "float", "duration", "string", "value":
		return strings.ToUpper(name)
	}
	return name
}

// isZeroDefault: f's default is its type's zero value, not worth printing.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// wrap breaks text into lines of at most width columns (a longer word gets
// a line of its own), each starting with indent and ending in a newline.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}
