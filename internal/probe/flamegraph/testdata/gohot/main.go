// gohot is a target for the flamegraph probe's privileged tests: after a
// line "cpu <n>" on stdin it spins (in main.spin) under main.hotA for 3n
// iterations and under main.hotB for n, interleaved in 20 rounds, prints "done", and waits for
// stdin to close.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

var sink uint64

// spin is the loop both hot functions run, so that their CPU time is in
// the ratio of their iterations. It calls tick now and then so that it is
// not a frameless leaf: the Go compiler gives a leaf function without
// locals no frame pointer, and a frame-pointer walk sampled there skips
// its caller (hotA or hotB).
//
//go:noinline
func spin(n uint64) {
	for i := uint64(0); i < n; i++ {
		sink += i * 7
		if i&(1<<20-1) == 0 {
			tick()
		}
	}
}

var ticks uint64

//go:noinline
func tick() { ticks++ }

//go:noinline
func hotA(n uint64) { spin(n) }

//go:noinline
func hotB(n uint64) { spin(n) }

func main() {
	fmt.Println("ready")
	in := bufio.NewReader(os.Stdin)
	var cmd string
	var n uint64
	if _, err := fmt.Fscan(in, &cmd, &n); err != nil || cmd != "cpu" {
		os.Exit(2)
	}
	for r := 0; r < 20; r++ {
		hotA(3 * n / 20)
		hotB(n / 20)
	}
	fmt.Println("done")
	_, _ = io.Copy(io.Discard, in)
}
