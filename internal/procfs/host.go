package procfs

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
)

// OSRelease reads os-release(5): <root>/etc/os-release, or
// <root>/usr/lib/os-release when the first does not exist.
func (fs FS) OSRelease() (map[string]string, error) {
	m, err := parseFile(fs.Path("/etc/os-release"), parseOSRelease)
	if errors.Is(err, os.ErrNotExist) {
		return parseFile(fs.Path("/usr/lib/os-release"), parseOSRelease)
	}
	return m, err
}

// ReadHostFile reads a small host file under the root (for example
// /etc/openEuler-latest) without its trailing newline.
func (fs FS) ReadHostFile(p string) (string, error) { return readString(fs.Path(p)) }

// parseOSRelease parses KEY=value lines, values optionally in single or
// double quotes with shell backslash escapes.
func parseOSRelease(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	s := newScanner(r)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || key == "" {
			continue
		}
		if n := len(val); n >= 2 && (val[0] == '"' || val[0] == '\'') && val[n-1] == val[0] {
			q := val[0]
			val = val[1 : n-1]
			if q == '"' {
				if u, err := strconv.Unquote(`"` + val + `"`); err == nil {
					val = u
				}
			}
		}
		out[key] = val
	}
	return out, s.Err()
}

// KernelRelease reads /proc/sys/kernel/osrelease (uname -r).
func (fs FS) KernelRelease() (string, error) {
	return readString(fs.proc("sys", "kernel", "osrelease"))
}

// Hostname reads /proc/sys/kernel/hostname (uname -n of the UTS namespace
// the reader is in).
func (fs FS) Hostname() (string, error) { return readString(fs.proc("sys", "kernel", "hostname")) }

// DMI reads one /sys/class/dmi/id attribute (sys_vendor, product_name,
// product_uuid, ...); absent on machines without DMI (many VMs, arm64).
func (fs FS) DMI(attr string) (string, error) {
	s, err := readString(fs.sys("class", "dmi", "id", attr))
	return strings.TrimSpace(s), err
}

// HypervisorType reads /sys/hypervisor/type (xen, ...), present on some
// paravirtualised guests.
func (fs FS) HypervisorType() (string, error) {
	s, err := readString(fs.sys("hypervisor", "type"))
	return strings.TrimSpace(s), err
}
