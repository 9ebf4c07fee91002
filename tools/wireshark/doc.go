// Package wireshark holds ina.lua, the Wireshark dissector of the INA
// header (docs/ina-header.md), and the tests that run it in tshark over
// inabox's own captures and compare every field with switch/inahdr.
// `make wireshark` installs the script; the package has no Go API.
package wireshark
