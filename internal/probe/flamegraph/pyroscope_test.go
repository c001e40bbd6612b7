package flamegraph

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestPyroscopeAddr(t *testing.T) {
	for in, want := range map[string]bool{
		"localhost:4040": true, "10.0.0.1:80": true, "[::1]:4040": true,
		"": false, "localhost": false, ":4040": false, "host:0": false, "host:70000": false, "host:x": false,
	} {
		if _, ok := pyroscopeAddr(in); ok != want {
			t.Errorf("%q: %v", in, ok)
		}
	}
}

func TestPushRequests(t *testing.T) {
	a := &procProfile{pid: 2, comm: "a", stacks: map[string]uint64{"main;f": 3}}
	b := &procProfile{pid: 1, comm: "b", stacks: map[string]uint64{"main;g": 4}}
	procs := map[int]*procProfile{2: a, 1: b}
	one := pushRequests(onCPU, procs, "u-u", false)
	if len(one) != 1 || one[0].name != "gala-gopher-oncpu-u-u" || string(one[0].body) != "[1]b;main;g 4\n[2]a;main;f 3\n" {
		t.Errorf("merged: %+v", one)
	}
	multi := pushRequests(offCPU, procs, "u", true)
	if len(multi) != 2 || multi[0].name != "gala-gopher-offcpu-u.1" || multi[1].name != "gala-gopher-offcpu-u.2" ||
		string(multi[1].body) != "[2]a;main;f 3\n" {
		t.Errorf("multi: %+v", multi)
	}
	if r := pushRequests(onCPU, nil, "u", false); len(r) != 0 {
		t.Errorf("empty window pushed: %+v", r)
	}
	raw := ingestURL("h:1", "n", onCPU, 10*time.Millisecond, time.Unix(100, 0), time.Unix(120, 0))
	u, err := url.Parse(raw)
	if err != nil || !strings.HasPrefix(raw, "http://h:1/ingest?") {
		t.Fatalf("%s: %v", raw, err)
	}
	q := u.Query()
	if q.Get("name") != "n" || q.Get("from") != "100" || q.Get("until") != "120" || q.Get("units") != "samples" || q.Get("sampleRate") != "100" {
		t.Errorf("query %v", q)
	}
	if q := ingestURL("h:1", "n", offCPU, 10*time.Millisecond, time.Unix(1, 0), time.Unix(2, 0)); !strings.Contains(q, "sampleRate=1000000") {
		t.Errorf("offcpu: %s", q)
	}
	for _, k := range []kind{mem, memGlibc} {
		if q := ingestURL("h:1", "n", k, 10*time.Millisecond, time.Unix(1, 0), time.Unix(2, 0)); !strings.Contains(q, "units=bytes") {
			t.Errorf("%s: %s", k, q)
		}
	}
}
