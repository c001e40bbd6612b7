package procfs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func addFixtures(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// /proc/<pid>/stat embeds a name the process chooses (prctl PR_SET_NAME),
// the one attacker-controlled piece of text in these files.
func FuzzParsePIDStat(f *testing.F) {
	addFixtures(f, "pid_stat", "pid_stat_oddcomm")
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parsePIDStat(bytes.NewReader(b))
		if err != nil {
			return
		}
		if !bytes.Contains(b, []byte("("+st.Comm+")")) {
			t.Fatalf("comm %q is not the parenthesised text of the input", st.Comm)
		}
		if st.CUTime > 1<<63 || st.CSTime > 1<<63 {
			t.Fatalf("negative child times leaked through: %d %d", st.CUTime, st.CSTime)
		}
	})
}

// Mount points come from users (any mkdir'd path), escaped by the kernel.
func FuzzParseMountinfo(f *testing.F) {
	addFixtures(f, "mountinfo", "mountinfo_escaped")
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := parseMountinfo(bytes.NewReader(b))
		if err != nil {
			return
		}
		lines := 0
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				lines++
			}
		}
		if len(ms) > lines {
			t.Fatalf("%d mounts from %d lines", len(ms), lines)
		}
	})
}

func FuzzParseSNMP(f *testing.F) {
	addFixtures(f, "snmp", "netstat")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseSNMP(bytes.NewReader(b))
		if err != nil {
			return
		}
		for proto, m := range s {
			if proto == "" || strings.ContainsAny(proto, " \t\n") {
				t.Fatalf("bad protocol name %q", proto)
			}
			for name := range m {
				if name == "" {
					t.Fatalf("%s: empty counter name", proto)
				}
			}
		}
	})
}
