package proctrack

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
)

// fixture builds a record byte by byte, independent of the generated type.
func fixture(typ, pid, tgid, ppid uint32, cg, ts uint64, exit uint32, comm string) []byte {
	b := make([]byte, 56)
	le := binary.LittleEndian
	le.PutUint32(b[0:], typ)
	le.PutUint32(b[4:], pid)
	le.PutUint32(b[8:], tgid)
	le.PutUint32(b[12:], ppid)
	le.PutUint64(b[16:], cg)
	le.PutUint64(b[24:], ts)
	le.PutUint32(b[32:], exit)
	copy(b[40:], comm)
	return b
}

func TestDecode(t *testing.T) {
	// An exec record of /bin/true with the values of a real run (pid 24627, parent 24600, cgroup2 root).
	captured, _ := hex.DecodeString(strings.Join([]string{
		"02000000", "33600000", "33600000", "18600000", // type exec, pid, tgid, ppid
		"0100000000000000",     // cgroup id 1
		"c6b8e59a75000000",     // timestamp
		"00000000", "00000000", // exit code, pad
		"7472756500000000", "0000000000000000", // "true"
	}, ""))
	tests := []struct {
		name string
		raw  []byte
		want Event
	}{
		{"captured exec", captured, Event{Type: Exec, PID: 24627, TGID: 24627, PPID: 24600, CgroupID: 1, TimestampNs: 0x759ae5b8c6, Comm: "true"}},
		{"fork", fixture(1, 10, 10, 1, 0xfffffffffff, 5, 0, "bash"), Event{Type: Fork, PID: 10, TGID: 10, PPID: 1, CgroupID: 0xfffffffffff, TimestampNs: 5, Comm: "bash"}},
		{"exit killed", fixture(3, 7, 5, 1, 42, 9, 9, "sleep"), Event{Type: Exit, PID: 7, TGID: 5, PPID: 1, CgroupID: 42, TimestampNs: 9, ExitCode: 9, Comm: "sleep"}},
		{"comm fills 16 bytes", fixture(2, 1, 1, 0, 0, 0, 0, "0123456789abcdef"), Event{Type: Exec, PID: 1, TGID: 1, Comm: "0123456789abcdef"}},
		{"comm high bytes", fixture(2, 1, 1, 0, 0, 0, 0, "\xc3\xa9t\xe9"), Event{Type: Exec, PID: 1, TGID: 1, Comm: "\xc3\xa9t\xe9"}},
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
	good := fixture(1, 1, 1, 0, 0, 0, 0, "x")
	for name, raw := range map[string][]byte{
		"empty":        nil,
		"short":        good[:55],
		"long":         append(append([]byte{}, good...), 0),
		"type 0":       fixture(0, 1, 1, 0, 0, 0, 0, "x"),
		"type unknown": fixture(4, 1, 1, 0, 0, 0, 0, "x"),
	} {
		if ev, err := Decode(raw); err == nil {
			t.Errorf("%s: no error, got %+v", name, ev)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(fixture(1, 10, 10, 1, 2, 3, 0, "bash"))
	f.Add(fixture(3, 10, 10, 1, 2, 3, 256, "0123456789abcdef"))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := Decode(raw)
		if err != nil {
			return
		}
		// A decoded record re-encodes to the same bytes, except the pad
		// and the comm bytes after its NUL, which Decode drops.
		back := fixture(uint32(ev.Type), ev.PID, ev.TGID, ev.PPID, ev.CgroupID, ev.TimestampNs, ev.ExitCode, ev.Comm)
		if string(back[:36]) != string(raw[:36]) {
			t.Fatalf("fields do not round-trip: %x vs %x", back[:36], raw[:36])
		}
		if strings.IndexByte(ev.Comm, 0) >= 0 || len(ev.Comm) > 16 || string(raw[40:40+len(ev.Comm)]) != ev.Comm {
			t.Fatalf("comm %q from %x", ev.Comm, raw[40:])
		}
	})
}
