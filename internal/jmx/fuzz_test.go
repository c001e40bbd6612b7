package jmx

import (
	"bufio"
	"bytes"
	"os"
	"testing"
)

// FuzzDecode: any bytes decode or fail with an error, never panic, and
// never read past the bound; seeds are streams the JDK wrote.
func FuzzDecode(f *testing.F) {
	for _, n := range []string{"objectname-jdk17.ser", "mixed-jdk17.ser"} {
		if b, err := os.ReadFile("testdata/" + n); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := NewDecoder(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for range 64 {
			v, err := d.ReadObject()
			if err != nil {
				if _, err := d.ReadBlock(1); err != nil {
					break
				}
				continue
			}
			Describe(v)
			Long(v)
			Composite(v)
			_, _ = stubRef(v)
		}
		if d.budget < 0 {
			t.Fatalf("read %d bytes past the bound", -d.budget)
		}
	})
}

// FuzzReturn: JRMP ReturnData messages (seeds: the JVM's answers in the
// recorded session) and connector addresses.
func FuzzReturn(f *testing.F) {
	for _, r := range readSession(f, "session-jdk17.bin") {
		if r.dir == 'S' && len(r.data) > 0 && r.data[0] == msgReturnData {
			f.Add(r.data)
		}
	}
	if b, err := os.ReadFile("testdata/service-url-jdk17.txt"); err == nil {
		f.Add(bytes.TrimSpace(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _, err := readReturn(bufio.NewReader(bytes.NewReader(b)), false)
		if err == nil {
			Describe(v)
		}
		_, _ = ParseServiceURL(string(b))
	})
}
