package procfs

import (
	"bytes"
	"fmt"
	"io"
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

// parsers are the parsers without a fuzz target of their own (net/dev and
// the cgroup I/O files have theirs in cgroup_test.go), fuzzed by
// FuzzParsers through one target (the fuzz tier runs each target for a
// fixed time, so one target for all keeps it short), each with its
// fixtures as seeds.
var parsers = []struct {
	seeds []string
	parse func(io.Reader) (any, error)
}{
	{[]string{"stat"}, func(r io.Reader) (any, error) { return parseStat(r) }},
	{[]string{"meminfo"}, func(r io.Reader) (any, error) { return parseMeminfo(r) }},
	{[]string{"diskstats", "diskstats_old"}, func(r io.Reader) (any, error) { return parseDiskstats(r) }},
	{[]string{"softirqs"}, func(r io.Reader) (any, error) { return parseSoftirqs(r) }},
	{[]string{"softnet_stat", "softnet_stat_old"}, func(r io.Reader) (any, error) { return parseSoftnetStat(r) }},
	{[]string{"cpuinfo"}, func(r io.Reader) (any, error) { return parseCPUInfo(r) }},
	{[]string{"uptime"}, func(r io.Reader) (any, error) { return parseUptime(r) }},
	{[]string{"pid_status"}, func(r io.Reader) (any, error) { return parseStatus(r) }},
	{[]string{"pid_io"}, func(r io.Reader) (any, error) { return parsePIDIO(r) }},
	{[]string{"pid_limits"}, func(r io.Reader) (any, error) { return parseLimits(r) }},
	{[]string{"pid_smaps_rollup"}, func(r io.Reader) (any, error) { return parseSmapsRollup(r) }},
	{[]string{"os-release"}, func(r io.Reader) (any, error) { return parseOSRelease(r) }},
	{[]string{"dentry-state"}, func(r io.Reader) (any, error) { return parseDentryState(r) }},
	{[]string{"vmallocinfo"}, func(r io.Reader) (any, error) { return parseVmallocinfo(r) }},
	{nil, func(r io.Reader) (any, error) { return ParseFlatKeyed(r) }},
}

// FuzzParsers: no parser panics, and one that accepts an input gives the
// same result when it parses it again (no state kept between calls).
func FuzzParsers(f *testing.F) {
	for i, p := range parsers {
		for _, n := range p.seeds {
			b, err := os.ReadFile(filepath.Join("testdata", n))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), b)
		}
	}
	f.Add(uint8(len(parsers)-1), []byte("anon 4096\nfile 8192\n"))
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		p := parsers[int(which)%len(parsers)]
		v, err := p.parse(bytes.NewReader(b))
		if err != nil {
			return
		}
		again, err := p.parse(bytes.NewReader(b))
		// Compared as printed: a NaN (strconv takes "NaN") equals itself.
		if err != nil || fmt.Sprintf("%#v", v) != fmt.Sprintf("%#v", again) {
			t.Fatalf("parser %d: %#v then %#v, %v", int(which)%len(parsers), v, again, err)
		}
	})
}
