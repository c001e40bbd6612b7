//go:build race

package output

// raceBuild: the race detector slows the differential test ~8x; it then
// compares fewer random stores (the fuzz target and plain runs take the rest).
const raceBuild = true
