package bpfrt

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

func TestWakeupBytes(t *testing.T) {
	for _, tt := range []struct {
		w    Wakeup
		ring int
		want uint64
	}{
		{Wakeup{}, 4096, 0},
		{Wakeup{Records: 64, RecordSize: 56}, 1 << 18, 64 * 64},
		{Wakeup{Records: 10, RecordSize: 1}, 1 << 18, 10 * 16}, // 1+8 rounds up to 16
		{Wakeup{Records: 64, RecordSize: 56, FillPercent: 25}, 4096, 1024},
		{Wakeup{Records: 64, RecordSize: 56, FillPercent: 25}, 1 << 18, 4096},
		{Wakeup{FillPercent: 50}, 8192, 4096},
	} {
		if got := tt.w.Bytes(tt.ring); got != tt.want {
			t.Errorf("%+v.Bytes(%d) = %d, want %d", tt.w, tt.ring, got, tt.want)
		}
	}
}

func TestParseCgroup2Mount(t *testing.T) {
	hybrid := `25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
34 25 0:30 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 34 0:39 / /sys/fs/cgroup/memory rw,relatime shared:10 - cgroup cgroup rw,memory
`
	nested := `30 1 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw
31 1 0:26 / /run/my\040cgroup rw shared:2 master:1 - cgroup2 none rw
`
	for _, tt := range []struct{ in, want string }{
		{hybrid, "/sys/fs/cgroup/unified"},
		{nested, "/run/my cgroup"}, // a bind of a sub-tree is not the hierarchy root
	} {
		got, err := parseCgroup2Mount(strings.NewReader(tt.in))
		if err != nil || got != tt.want {
			t.Errorf("got %q, %v; want %q", got, err, tt.want)
		}
	}
	if got, err := parseCgroup2Mount(strings.NewReader("42 34 0:39 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")); err == nil {
		t.Errorf("v1 only: got %q, want error", got)
	}
}

func TestHookErrorAndMissingHooks(t *testing.T) {
	var buf bytes.Buffer
	m := NewMissingHooks(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	err := hookErr("tracepoint/tcp/tcp_retransmit_skb", errors.New("no such tracepoint"))
	if !errors.Is(err, ErrHookUnavailable) {
		t.Error("HookError is not ErrHookUnavailable")
	}
	if !errors.Is(hookErr("kprobe", ebpf.ErrNotSupported), ebpf.ErrNotSupported) {
		t.Error("HookError hides its cause")
	}
	for range 3 {
		if got := m.Report(err, "retran_packets", "tcp_abnormal"); !errors.Is(got, err) {
			t.Errorf("Report returned %v", got)
		}
	}
	if m.Report(nil, "x") != nil {
		t.Error("Report(nil) != nil")
	}
	want := `level=WARN msg="hook tracepoint/tcp/tcp_retransmit_skb unavailable: disables retran_packets, tcp_abnormal (no such tracepoint)"` + "\n"
	if buf.String() != want {
		t.Errorf("log:\n%s\nwant once:\n%s", buf.String(), want)
	}
	var none *MissingHooks
	if none.OrNew(nil) == nil || m.OrNew(nil) != m {
		t.Error("OrNew: a nil reporter is not replaced, or a given one is")
	}
}

type countCloser struct{ opened, closed *int }

func (c countCloser) Close() error { *c.closed++; return nil }

func TestStatsEnablesWhileRegistered(t *testing.T) {
	s := NewStats()
	var opened, closed int
	s.enableStats = func(uint32) (io.Closer, error) { opened++; return countCloser{&opened, &closed}, nil }
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Register("a", nil))
	must(s.Register("b", nil))
	must(s.Register("a", nil)) // replace
	s.Unregister("a")
	if opened != 1 || closed != 0 {
		t.Fatalf("opened %d closed %d with b registered", opened, closed)
	}
	s.Unregister("b")
	s.Unregister("b")
	if opened != 1 || closed != 1 {
		t.Fatalf("opened %d closed %d after all unregistered", opened, closed)
	}
	must(s.Register("c", nil))
	if opened != 2 {
		t.Fatalf("not re-enabled: opened %d", opened)
	}
	s.enableStats = func(uint32) (io.Closer, error) { return nil, errors.New("EPERM") }
	s.Unregister("c")
	if err := s.Register("d", nil); err == nil {
		t.Fatal("enable failure not reported")
	}
	var buf bytes.Buffer
	s.TryRegister(slog.New(slog.NewTextHandler(&buf, nil)), "d", nil)
	if got := buf.String(); !strings.Contains(got, `msg="d: BPF run-time statistics unavailable" err="enable BPF run-time statistics: EPERM"`) {
		t.Fatalf("TryRegister's failure logged as %q", got)
	}
	var none *Stats // no statistics wanted
	none.TryRegister(nil, "e", nil)
	none.Unregister("e")
}

func TestCString(t *testing.T) {
	for _, c := range []struct {
		in   []int8
		want string
	}{
		{[]int8{'h', 'o', 'g', 0, 'x'}, "hog"},
		{[]int8{'a', 'b'}, "ab"},
		{[]int8{'a', -1, 'b', 0}, "a?b"},
		{nil, ""},
	} {
		if got := CString(c.in); got != c.want {
			t.Errorf("CString(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	got, err := ParseCPUList("0-2,5,7-8")
	if err != nil || !reflect.DeepEqual(got, []int{0, 1, 2, 5, 7, 8}) {
		t.Errorf("%v %v", got, err)
	}
	for _, bad := range []string{"", "a", "3-1", "1-x"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStatsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		val     string
		on      bool
		wantErr string
	}{
		{"", false, ""}, {"0", false, ""}, {"off", false, ""}, {"FALSE", false, ""},
		{"1", true, ""}, {"on", true, ""}, {" true ", true, ""},
		{"yes please", false, `GALAGO_BPF_STATS="yes please": want 1, true, on, 0, false or off`},
	} {
		t.Setenv(EnvStats, tc.val)
		var buf bytes.Buffer
		s, err := StatsFromEnv(slog.New(slog.NewTextHandler(&buf, nil)))
		switch {
		case tc.wantErr != "":
			if err == nil || err.Error() != tc.wantErr || s != nil {
				t.Errorf("%q: %v, %v; want error %s", tc.val, s, err, tc.wantErr)
			}
		case err != nil || (s != nil) != tc.on:
			t.Errorf("%q: stats %v, err %v; want on=%v", tc.val, s, err, tc.on)
		case !tc.on && !strings.Contains(buf.String(), "BPF run-time statistics off"):
			t.Errorf("%q: off without its log line: %q", tc.val, buf.String())
		}
	}
}
