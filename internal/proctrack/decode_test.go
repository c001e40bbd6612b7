package proctrack

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
)

// rec is a record's fields, for fixtures built byte by byte, independent
// of the generated type.
type rec struct {
	typ, pid, tgid, ppid uint32
	cg, ts, start        uint64
	exit                 uint32
	comm                 string
	cmdline              string // captured bytes
	cmdlineSize          uint32
	cmdlineLen           int // -1: len(cmdline)
	hierarchy            uint32
}

func (r rec) bytes() []byte {
	b := make([]byte, 72+len(r.cmdline))
	le := binary.LittleEndian
	le.PutUint32(b[0:], r.typ)
	le.PutUint32(b[4:], r.pid)
	le.PutUint32(b[8:], r.tgid)
	le.PutUint32(b[12:], r.ppid)
	le.PutUint64(b[16:], r.cg)
	le.PutUint64(b[24:], r.ts)
	le.PutUint64(b[32:], r.start)
	le.PutUint32(b[40:], r.exit)
	n := r.cmdlineLen
	if n < 0 {
		n = len(r.cmdline)
	}
	le.PutUint32(b[44:], uint32(n))
	le.PutUint32(b[48:], r.cmdlineSize)
	le.PutUint32(b[52:], r.hierarchy)
	copy(b[56:72], r.comm)
	copy(b[72:], r.cmdline)
	return b
}

// withLen is the record with its cmdline_len field set to n.
func withLen(b []byte, n uint32) []byte {
	binary.LittleEndian.PutUint32(b[44:], n)
	return b
}

func TestDecode(t *testing.T) {
	// An exec record of `/bin/sleep 1` with the values of a real run (pid
	// 24627, parent 24600, cgroup2 root).
	captured, _ := hex.DecodeString(strings.Join([]string{
		"02000000", "33600000", "33600000", "18600000", // type exec, pid, tgid, ppid
		"0100000000000000",                             // cgroup id 1
		"c6b8e59a75000000",                             // timestamp
		"00e40b5402000000",                             // start_boottime 10 s
		"00000000", "0d000000", "0d000000", "00000000", // exit code, cmdline len 13, size 13, pad
		"736c656570000000", "0000000000000000", // comm "sleep"
		"2f62696e2f736c65657000" + "3100", // "/bin/sleep\x001\x00"
	}, ""))
	tests := []struct {
		name string
		raw  []byte
		want Event
	}{
		{"captured exec", captured, Event{Type: Exec, PID: 24627, TGID: 24627, PPID: 24600, CgroupID: 1, TimestampNs: 0x759ae5b8c6,
			StartBoottimeNs: 10_000_000_000, Comm: "sleep", Cmdline: "/bin/sleep\x001\x00", CmdlineSize: 13}},
		{"fork", rec{typ: 1, pid: 10, tgid: 10, ppid: 1, cg: 0xfffffffffff, ts: 5, comm: "bash", cmdline: "-bash\x00", cmdlineSize: 6, cmdlineLen: -1}.bytes(),
			Event{Type: Fork, PID: 10, TGID: 10, PPID: 1, CgroupID: 0xfffffffffff, TimestampNs: 5, Comm: "bash", Cmdline: "-bash\x00", CmdlineSize: 6}},
		{"exit killed", rec{typ: 3, pid: 7, tgid: 5, ppid: 1, cg: 42, ts: 9, exit: 9, comm: "sleep"}.bytes(),
			Event{Type: Exit, PID: 7, TGID: 5, PPID: 1, CgroupID: 42, TimestampNs: 9, ExitCode: 9, Comm: "sleep"}},
		{"cgroup mkdir", rec{typ: 4, pid: 8, tgid: 7, cg: 4242, ts: 11, hierarchy: 0, comm: "runc:[2:INIT]", cmdline: "/kubepods/pod1/abc", cmdlineLen: -1}.bytes(),
			Event{Type: CgroupMkdir, PID: 8, TGID: 7, CgroupID: 4242, TimestampNs: 11, Comm: "runc:[2:INIT]", CgroupPath: "/kubepods/pod1/abc"}},
		{"cgroup rmdir v1", rec{typ: 5, pid: 9, tgid: 9, cg: 77, ts: 12, hierarchy: 4, comm: "runc", cmdline: "/docker/x", cmdlineLen: -1}.bytes(),
			Event{Type: CgroupRmdir, PID: 9, TGID: 9, CgroupID: 77, TimestampNs: 12, Hierarchy: 4, Comm: "runc", CgroupPath: "/docker/x"}},
		{"comm fills 16 bytes", rec{typ: 2, pid: 1, tgid: 1, comm: "0123456789abcdef"}.bytes(), Event{Type: Exec, PID: 1, TGID: 1, Comm: "0123456789abcdef"}},
		{"comm high bytes", rec{typ: 2, pid: 1, tgid: 1, comm: "\xc3\xa9t\xe9"}.bytes(), Event{Type: Exec, PID: 1, TGID: 1, Comm: "\xc3\xa9t\xe9"}},
		{"cmdline cut", rec{typ: 2, pid: 1, tgid: 1, comm: "x", cmdline: strings.Repeat("a", 4096), cmdlineSize: 5000, cmdlineLen: -1}.bytes(),
			Event{Type: Exec, PID: 1, TGID: 1, Comm: "x", Cmdline: strings.Repeat("a", 4096), CmdlineSize: 5000}},
	}
	for _, tt := range tests {
		got, err := Decode(tt.raw)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := rec{typ: 1, pid: 1, tgid: 1, comm: "x", cmdline: "ab\x00", cmdlineLen: -1}.bytes()
	for name, raw := range map[string][]byte{
		"empty":             nil,
		"short header":      good[:71],
		"short cmdline":     good[:74],
		"long":              append(append([]byte{}, good...), 0),
		"type 0":            rec{typ: 0, pid: 1, tgid: 1, comm: "x"}.bytes(),
		"type unknown":      rec{typ: 6, pid: 1, tgid: 1, comm: "x"}.bytes(),
		"cmdline over max":  withLen(rec{typ: 2, pid: 1, tgid: 1, comm: "x", cmdline: strings.Repeat("a", 4097)}.bytes(), 4097),
		"cmdline len wraps": withLen(rec{typ: 2, pid: 1, tgid: 1, comm: "x"}.bytes(), 0xffffffff),
	} {
		if ev, err := Decode(raw); err == nil {
			t.Errorf("%s: no error, got %+v", name, ev)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(rec{typ: 1, pid: 10, tgid: 10, ppid: 1, cg: 2, ts: 3, comm: "bash", cmdline: "bash\x00", cmdlineLen: -1}.bytes())
	f.Add(rec{typ: 3, pid: 10, tgid: 10, ppid: 1, cg: 2, ts: 3, exit: 256, comm: "0123456789abcdef"}.bytes())
	f.Add([]byte{1, 2, 3})
	f.Add(rec{typ: 5, pid: 10, tgid: 10, cg: 2, ts: 3, hierarchy: 4, comm: "systemd", cmdline: "/system.slice/x.service", cmdlineLen: -1}.bytes())
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := Decode(raw)
		if err != nil {
			return
		}
		// A decoded record re-encodes to the same bytes, except the pad,
		// the comm bytes after its NUL and the cmdline bytes past its
		// length, which Decode drops.
		// Cgroup events carry a hierarchy and a path instead of the
		// process fields (ppid, start, exit code, cmdline size), which
		// Decode leaves zero: compare against the record with those zeroed.
		want := append([]byte{}, raw...)
		text := ev.Cmdline
		if ev.Type == CgroupMkdir || ev.Type == CgroupRmdir {
			for _, f := range [][2]int{{12, 16}, {32, 44}, {48, 52}} {
				clear(want[f[0]:f[1]])
			}
			text = ev.CgroupPath
		} else {
			clear(want[52:56])
		}
		back := rec{typ: uint32(ev.Type), pid: ev.PID, tgid: ev.TGID, ppid: ev.PPID, cg: ev.CgroupID, ts: ev.TimestampNs,
			start: ev.StartBoottimeNs, exit: ev.ExitCode, hierarchy: ev.Hierarchy, comm: ev.Comm, cmdline: text,
			cmdlineSize: ev.CmdlineSize, cmdlineLen: -1}.bytes()
		if string(back[:56]) != string(want[:56]) {
			t.Fatalf("fields do not round-trip: %x vs %x", back[:56], want[:56])
		}
		if strings.IndexByte(ev.Comm, 0) >= 0 || len(ev.Comm) > 16 || string(raw[56:56+len(ev.Comm)]) != ev.Comm {
			t.Fatalf("comm %q from %x", ev.Comm, raw[56:72])
		}
		if string(raw[72:]) != text || len(text) > CmdlineMax {
			t.Fatalf("cmdline or path %q", text)
		}
	})
}

func TestEventProcess(t *testing.T) {
	e := Event{Type: Exec, PID: 7, TGID: 5, PPID: 1, CgroupID: 42, StartBoottimeNs: 12_345_678_901,
		Comm: "java", Cmdline: "java\x00-cp\x00x.jar\x00org.example.Main\x00"}
	p := e.Process()
	if p.PID != 5 || p.PPID != 1 || p.Comm != "java" || p.Cmdline != "java -cp x.jar org.example.Main" ||
		p.MainClass != "org.example.Main" || p.StartTime != 1234 || p.CgroupID != 42 || p.Exited {
		t.Errorf("%+v", p)
	}
	if p := (Event{Type: Fork, TGID: 3, Comm: "sh"}).Process(); p.Cmdline != "" || p.PID != 3 {
		t.Errorf("no cmdline: %+v", p)
	}
}
