package elfsym

import (
	"debug/elf"
	"debug/gosym"
	"testing"
)

// BenchmarkGoTLSLookup: finding crypto/tls.(*Conn).Read and Write in a Go
// program, with its symbols and stripped, by this package and by what
// the TLS attach did before (debug/elf's whole symbol table; for a
// stripped binary, debug/gosym's whole function table). Allocations per
// look-up are the figure that matters (the agent's RSS).
func BenchmarkGoTLSLookup(b *testing.B) {
	bin, stripped := goBinaries(b)
	names := []string{"crypto/tls.(*Conn).Write", "crypto/tls.(*Conn).Read"}
	for _, c := range []struct{ name, path string }{{"symbols", bin}, {"stripped", stripped}} {
		b.Run(c.name+"/elfsym", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f, err := Open(c.path)
				if err != nil {
					b.Fatal(err)
				}
				syms, err := f.Find(Static, names)
				if err != nil || len(syms) < 2 {
					if _, err := f.GoFuncs(names); err != nil {
						b.Fatal(err)
					}
				}
				f.Close()
			}
		})
		b.Run(c.name+"/debug-elf", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f, err := elf.Open(c.path)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Symbols(); err != nil {
					pcln, _ := f.Section(".gopclntab").Data()
					if _, err := gosym.NewTable(nil, gosym.NewLineTable(pcln, f.Section(".text").Addr)); err != nil {
						b.Fatal(err)
					}
				}
				f.Close()
			}
		})
	}
}
