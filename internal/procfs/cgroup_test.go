package procfs

import (
	"bytes"
	"strings"
	"testing"
)

func TestCgroupMountsOf(t *testing.T) {
	// A hybrid host (this project's CI) plus a bind mount of a sub-cgroup,
	// which is not a hierarchy's mount point.
	const mi = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 23 0:32 /kubepods /var/lib/x rw,relatime - cgroup cgroup rw,memory
51 23 0:38 / /mnt/again rw,relatime - cgroup2 cgroup2 rw
`
	ms, err := parseMountinfo(strings.NewReader(mi))
	if err != nil {
		t.Fatal(err)
	}
	m := cgroupMountsOf(ms)
	if m.V2 != "/sys/fs/cgroup/unified" {
		t.Errorf("V2 = %q", m.V2)
	}
	want := map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct", "memory": "/sys/fs/cgroup/memory"}
	if len(m.V1) != len(want) {
		t.Errorf("V1 = %v, want %v", m.V1, want)
	}
	for c, p := range want {
		if m.V1[c] != p {
			t.Errorf("V1[%s] = %q, want %q", c, m.V1[c], p)
		}
	}
}

func TestParseFlatKeyed(t *testing.T) {
	m, err := ParseFlatKeyed(strings.NewReader("usage_usec 12\nuser_usec 7\nbad\nsome avg10=0.00\nneg -1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m["usage_usec"] != 12 || m["user_usec"] != 7 {
		t.Errorf("%v", m)
	}
}

func TestParseBlkioRWStat(t *testing.T) {
	const in = "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 8192\n8:0 Async 4096\n8:0 Discard 0\n8:0 Total 12288\n" +
		"8:16 Read 100\n8:16 Write 200\n8:16 Total 300\nTotal 12588\n"
	io, err := ParseBlkioRWStat(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if io != (IOBytes{Read: 4196, Write: 8392, Devices: 2}) {
		t.Errorf("%+v", io)
	}
	io, err = ParseBlkioRWStat(strings.NewReader("Total 0\n"))
	if err != nil || io != (IOBytes{}) {
		t.Errorf("no device: %+v, %v", io, err)
	}
	if _, err := ParseBlkioRWStat(strings.NewReader("8:0 Read x\n")); err == nil {
		t.Error("bad value accepted")
	}
}

func TestParseIOStat(t *testing.T) {
	io, err := ParseIOStat(strings.NewReader("8:0 rbytes=1000 wbytes=2000 rios=1 wios=2 dbytes=0 dios=0\n259:0 rbytes=10 wbytes=20 rios=1 wios=1 dbytes=0 dios=0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if io != (IOBytes{Read: 1010, Write: 2020, Devices: 2}) {
		t.Errorf("%+v", io)
	}
}

func TestParseNetDev(t *testing.T) {
	const in = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  999999     999    0    0    0     0          0         0   999999     999    0    0    0     0       0          0
  eth0:123456     100    1    2    0     0          0         0    65432      80    3    4    0     0       0          0
`
	devs, err := ParseNetDev(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := NetDevStats{RxBytes: 123456, RxPackets: 100, RxErrors: 1, RxDropped: 2, TxBytes: 65432, TxPackets: 80, TxErrors: 3, TxDropped: 4}
	if len(devs) != 2 || devs["eth0"] != want || devs["lo"].RxBytes != 999999 {
		t.Errorf("%+v", devs)
	}
}

// Interface names are chosen by whoever creates the device.
func FuzzParseNetDev(f *testing.F) {
	f.Add([]byte("  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		devs, err := ParseNetDev(bytes.NewReader(b))
		if err != nil {
			return
		}
		for name := range devs {
			if strings.ContainsAny(name, ":\n") {
				t.Fatalf("name %q keeps a separator", name)
			}
		}
	})
}

func FuzzParseBlkio(f *testing.F) {
	f.Add([]byte("8:0 Read 4096\n8:0 Total 4096\nTotal 4096\n"), []byte("8:0 rbytes=1 wbytes=2\n"))
	f.Fuzz(func(t *testing.T, v1, v2 []byte) {
		if io, err := ParseBlkioRWStat(bytes.NewReader(v1)); err == nil && io.Devices > bytes.Count(v1, []byte("Total"))+1 {
			t.Fatalf("%d devices from %d Total lines", io.Devices, bytes.Count(v1, []byte("Total")))
		}
		if io, err := ParseIOStat(bytes.NewReader(v2)); err == nil && io.Devices > bytes.Count(v2, []byte("\n"))+1 {
			t.Fatalf("%d devices from %d lines", io.Devices, bytes.Count(v2, []byte("\n"))+1)
		}
	})
}
