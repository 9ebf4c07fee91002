//go:build purego || !amd64

package host

// wideQuant is false: there is no wide quantization kernel in this build
// (quantizeWire's Go loop takes every value). See quant_amd64.go.
var wideQuant = false

func quantizeWireWide([]byte, []float32, float64, int64) int {
	panic("host: no wide quantization kernel")
}
