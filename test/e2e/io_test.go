package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// loopDevice is a loop device over a sparse file, attached with
// LOOP_CONFIGURE (autoclear: detached when the test closes it), with a
// device node in the test's directory (no udev here).
type loopDevice struct{ name, node string }

func attachLoop(t *testing.T, size int64) loopDevice {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "backing"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ctl)
	for try := 0; try < 20; try++ {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("loop%d", n)
		b, err := os.ReadFile("/sys/class/block/" + name + "/dev")
		if err != nil {
			t.Fatal(err)
		}
		ma, mi, _ := strings.Cut(strings.TrimSpace(string(b)), ":")
		major, _ := strconv.Atoi(ma)
		minor, _ := strconv.Atoi(mi)
		node := filepath.Join(dir, name)
		if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(uint32(major), uint32(minor)))); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(node, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(fd, &cfg)
		if errors.Is(err, unix.EBUSY) {
			unix.Close(fd)
			os.Remove(node)
			continue
		}
		if err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return loopDevice{name: name, node: node}
	}
	t.Fatal("no free loop device")
	return loopDevice{}
}

// diskstat is the kernel's own accounting of a block device
// (/sys/block/<dev>/stat): requests completed and sectors transferred.
type diskstat struct{ reads, readSectors, writes, writeSectors uint64 }

func readDiskstat(t *testing.T, name string) diskstat {
	t.Helper()
	b, err := os.ReadFile("/sys/block/" + name + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 7 {
		t.Fatalf("stat %q", b)
	}
	v := func(i int) uint64 {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return diskstat{reads: v(0), readSectors: v(2), writes: v(4), writeSectors: v(6)}
}

// periodSums adds up, per metric, the values of the series of one device
// over every distinct report period the exposition showed (each sample
// carries its period's end as timestamp).
type periodSums struct {
	seen map[string]map[string]float64 // metric -> timestamp -> value
}

func (p *periodSums) observe(t *testing.T, expo, metric, label string) {
	t.Helper()
	for _, l := range samples(expo, metric) {
		if !strings.Contains(l, label) {
			continue
		}
		f := strings.Fields(l)
		if len(f) < 3 {
			t.Fatalf("sample without timestamp: %q", l)
		}
		v, err := strconv.ParseFloat(f[len(f)-2], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", l, err)
		}
		if p.seen[metric] == nil {
			p.seen[metric] = map[string]float64{}
		}
		p.seen[metric][f[len(f)-1]] = v
	}
}

func (p *periodSums) sum(metric string) float64 {
	var s float64
	for _, v := range p.seen[metric] {
		s += v
	}
	return s
}

// TestIOProbeAgainstDiskstats enables the io probe over REST on a loop
// device the test owns (dev_name), does O_DIRECT writes and reads, and
// checks the exported gala_gopher_block_* series against the kernel's own
// accounting of that device: bytes written and read, and requests
// completed (count_latency_req), summed over the report periods they fell
// in. The request-stage sums must be the sum of the driver and device
// stages.
func TestIOProbeAgainstDiskstats(t *testing.T) {
	requireE2E(t)
	ld := attachLoop(t, 64<<20)
	d := startDaemon(t, daemonOpts{})
	body := fmt.Sprintf(`{"cmd":{"probe":["io_trace","io_count"]},"params":{"report_period":5,"dev_name":"%s"},"state":"running"}`, ld.name)
	if code, reply := d.put("io", body); code != http.StatusOK || reply != successReply {
		t.Fatalf("PUT /io: %d %q", code, reply)
	}
	if code, got := d.get("io"); code != http.StatusOK || !strings.Contains(got, `"state":"running"`) || !strings.Contains(got, `"dev_name":"`+ld.name+`"`) {
		t.Fatalf("GET /io: %d %s", code, got)
	}

	before := readDiskstat(t, ld.name)
	fd, err := unix.Open(ld.node, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := unix.Mmap(-1, 0, 32<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	const writes, reads = 30, 20
	for i := 0; i < writes; i++ {
		if _, err := unix.Pwrite(fd, buf, int64(i*len(buf))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < reads; i++ {
		if _, err := unix.Pread(fd, buf, int64(i*len(buf))); err != nil {
			t.Fatal(err)
		}
	}
	unix.Close(fd)
	after := readDiskstat(t, ld.name)
	wantW := float64((after.writeSectors - before.writeSectors) * 512)
	wantR := float64((after.readSectors - before.readSectors) * 512)
	wantReq := float64(after.writes - before.writes + after.reads - before.reads)
	if wantW != writes*32<<10 || wantR != reads*32<<10 || wantReq != writes+reads {
		t.Fatalf("diskstats moved by %v bytes written, %v read, %v requests: not the test's I/O alone", wantW, wantR, wantReq)
	}

	label := `blk_name="` + ld.name + `"`
	sums := &periodSums{seen: map[string]map[string]float64{}}
	metrics := []string{"gala_gopher_block_write_bytes", "gala_gopher_block_read_bytes", "gala_gopher_block_count_latency_req",
		"gala_gopher_block_latency_req_sum", "gala_gopher_block_latency_driver_sum", "gala_gopher_block_latency_device_sum"}
	scrapeAll := func() {
		expo := d.scrape()
		for _, m := range metrics {
			sums.observe(t, expo, m, label)
		}
	}
	waitFor(t, 30*time.Second, "the I/O in /metrics", func() bool {
		scrapeAll()
		return sums.sum("gala_gopher_block_count_latency_req") >= wantReq
	})
	// One more period: nothing else may arrive.
	time.Sleep(6 * time.Second)
	scrapeAll()
	for _, c := range []struct {
		metric string
		want   float64
	}{
		{"gala_gopher_block_write_bytes", wantW},
		{"gala_gopher_block_read_bytes", wantR},
		{"gala_gopher_block_count_latency_req", wantReq},
	} {
		if got := sums.sum(c.metric); got != c.want {
			t.Errorf("%s = %v over %d periods, diskstats say %v", c.metric, got, len(sums.seen[c.metric]), c.want)
		}
	}
	req, drv, dev := sums.sum("gala_gopher_block_latency_req_sum"), sums.sum("gala_gopher_block_latency_driver_sum"), sums.sum("gala_gopher_block_latency_device_sum")
	if req <= 0 || drv+dev != req {
		t.Errorf("stage sums: request %v, driver %v + device %v", req, drv, dev)
	}
	// Only the selected device is exported.
	for _, l := range samples(d.scrape(), "gala_gopher_block_write_bytes") {
		if !strings.Contains(l, label) {
			t.Errorf("dev_name %s: %s", ld.name, l)
		}
	}
}
