package identity

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestScanCgroups walks fixture hosts, pure cgroup2 and hybrid (v1
// controllers, a named v1 hierarchy, cgroup2 under unified): every
// container directory is found once per hierarchy with the hierarchy id
// the init process's cgroup file gives it, sub-cgroups of a container
// too, and nothing else.
func TestScanCgroups(t *testing.T) {
	const cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	ctr := "/kubepods/burstable/pod6c0218f9-26dc-5733-ee8e-5e9e719f00c1/" + cid
	for _, tc := range []struct {
		name, mountinfo, cgroup string
		mounts                  []string // mount points holding the container
		want                    []string // hierarchy:path
	}{{
		name:      "cgroup2",
		mountinfo: "31 23 0:28 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
		cgroup:    "0::/\n",
		mounts:    []string{"/sys/fs/cgroup"},
		want:      []string{"0:" + ctr, "0:" + ctr + "/sub"},
	}, {
		name: "hybrid",
		mountinfo: "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
			"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n" +
			"33 31 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
			"40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n" +
			"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n" +
			"42 31 0:39 /kubepods /mnt/bind rw,relatime - cgroup cgroup rw,memory\n" +
			"43 31 0:40 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n",
		// pids' id is not in the file: its directories are not reported.
		cgroup: "9:name=systemd:/\n4:memory:/\n2:cpuacct,cpu:/\n0::/\n",
		mounts: []string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/systemd",
			"/sys/fs/cgroup/unified", "/mnt/bind", "/sys/fs/cgroup/pids"},
		want: []string{"0:" + ctr, "0:" + ctr + "/sub", "2:" + ctr, "2:" + ctr + "/sub", "4:" + ctr, "4:" + ctr + "/sub",
			"9:" + ctr, "9:" + ctr + "/sub"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write := func(p, s string) {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("/proc/1/mountinfo", tc.mountinfo)
			write("/proc/1/cgroup", tc.cgroup)
			for _, m := range tc.mounts {
				write(m+ctr+"/sub/cgroup.procs", "")
				write(m+"/system.slice/cron.service/cgroup.procs", "")
			}
			evs, err := ScanCgroups(root)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range evs {
				if ev.ID == 0 || ev.Removed {
					t.Errorf("event %+v", ev)
				}
				got = append(got, strconv.Itoa(int(ev.Hierarchy))+":"+ev.Path)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("scan\n got %q\nwant %q", got, tc.want)
			}
		})
	}
	if _, err := ScanCgroups(t.TempDir()); err == nil {
		t.Error("a root without /proc: no error")
	}
}
