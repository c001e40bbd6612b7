package proc

import (
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/table"
)

func TestLibcPaths(t *testing.T) {
	maps := `55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 123 /usr/bin/cat
7f1c2a000000-7f1c2a028000 r--p 00000000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c2a028000-7f1c2a1bd000 r-xp 00028000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1c2b000000-7f1c2b001000 r-xp 00000000 fd:01 789 /lib/ld-musl-x86_64.so.1
7f1c2c000000-7f1c2c001000 r-xp 00000000 fd:01 790 /usr/lib/libcap.so.2
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
7f1c2d000000-7f1c2d001000 rw-p 00000000 00:00 0
`
	got := libcPaths([]byte(maps))
	want := []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib/ld-musl-x86_64.so.1"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("libcPaths = %v, want %v", got, want)
	}
	if !isLibc("/lib64/libc-2.17.so") || isLibc("/usr/lib/libcrypt.so.1") {
		t.Error("isLibc")
	}
}

func TestDNSRecords(t *testing.T) {
	key := func(tgid uint32, name string) procProcDnsKey {
		k := procProcDnsKey{Tgid: tgid}
		for i := 0; i < len(name) && i < len(k.Domain); i++ {
			k.Domain[i] = int8(name[i])
		}
		return k
	}
	end := time.Unix(1700000000, 0)
	recs, evs := dnsRecords(map[procProcDnsKey]procProcDnsVal{
		key(9, "a.example"): {Count: 4, Errors: 1, NsSumOk: 300, NsMaxOk: 200},
		key(9, "b.example"): {Count: 2, Errors: 2},
	}, true, end, time.Minute)
	if len(recs) != 2 || len(evs) != 2 {
		t.Fatalf("%d rows %d events", len(recs), len(evs))
	}
	for _, r := range recs {
		v := func(f string) table.Value { return r.Values[table.ProcDns.MustIndex(f)] }
		switch r.Str("domain") {
		case "a.example":
			if v("delay_avg").Num != 100 || v("max_delay").Num != 200 || v("error_ratio").Num != 25 || v("count").Num != 4 || v("error_count").Num != 1 {
				t.Errorf("a: %+v", r.Values)
			}
		case "b.example":
			if v("delay_avg").Set || v("max_delay").Set || v("error_ratio").Num != 100 {
				t.Errorf("b: %+v", r.Values)
			}
		default:
			t.Errorf("domain %q", r.Str("domain"))
		}
	}
	for _, e := range evs {
		if e.EntityID == "9_a.example" && e.Message != "Process(PID:9) DNS error ratio(25.000 %)." {
			t.Errorf("event %+v", e)
		}
	}
	if _, evs := dnsRecords(map[procProcDnsKey]procProcDnsVal{key(1, "x"): {Count: 1, Errors: 1}}, false, end, time.Minute); len(evs) != 0 {
		t.Errorf("events with report_event off: %+v", evs)
	}
}
