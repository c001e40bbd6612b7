package proctrack

import "testing"

// BenchmarkDecode is one process lifecycle record from the ring buffer
// (make bench-micro): one per fork, exec and exit on the host.
func BenchmarkDecode(b *testing.B) {
	raw := rec{typ: uint32(Exec), pid: 24627, tgid: 24627, ppid: 24600, cg: 1, ts: 5, comm: "nginx", cmdline: "nginx\x00-g\x00daemon off;\x00", cmdlineLen: -1}.bytes()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}
