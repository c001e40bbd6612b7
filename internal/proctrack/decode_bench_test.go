package proctrack

import "testing"

// BenchmarkDecode is one process lifecycle record from the ring buffer
// (make bench-micro): one per fork, exec and exit on the host.
func BenchmarkDecode(b *testing.B) {
	raw := fixture(uint32(Exec), 24627, 24627, 24600, 1, 5, 0, "nginx")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}
