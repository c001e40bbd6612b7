package virt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// guest is one QEMU/KVM process's identity.
type guest struct {
	name string // -name guest=<name>, else the libvirt machine cgroup's name
	uuid string // -uuid, else -smbios type=1,uuid=
}

// maxCmdline bounds a command line read (libvirt's run to a few KiB).
const maxCmdline = 256 << 10

// errTooLong marks a command line over maxCmdline.
var errTooLong = errors.New("command line longer than 256 KiB")

// splitCmdline splits /proc/<pid>/cmdline (NUL-separated arguments).
func splitCmdline(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// isQEMU reports whether argv[0] is a QEMU system emulator: qemu-kvm
// (RHEL, openEuler), qemu-system-<arch> (upstream, Debian), or kvm
// (Debian's wrapper name).
func isQEMU(argv0 string) bool {
	b := path.Base(argv0)
	return b == "qemu-kvm" || b == "kvm" || strings.HasPrefix(b, "qemu-system-")
}

// qemuOpts splits a QEMU option value "a=1,b=2" into key/value pairs,
// honouring ",," as an escaped comma. A first element without "=" is
// returned under implied (QEMU's implied key: -name foo means guest=foo).
func qemuOpts(v, implied string) map[string]string {
	out := map[string]string{}
	var cur strings.Builder
	var parts []string
	for i := 0; i < len(v); i++ {
		if v[i] == ',' {
			if i+1 < len(v) && v[i+1] == ',' {
				cur.WriteByte(',')
				i++
				continue
			}
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(v[i])
	}
	parts = append(parts, cur.String())
	for i, p := range parts {
		k, val, ok := strings.Cut(p, "=")
		if !ok {
			if i == 0 && implied != "" {
				out[implied] = p
			}
			continue
		}
		out[k] = val
	}
	return out
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// parseQEMU reads the guest's name and UUID from a QEMU command line
// (options may be written -opt or --opt). ok is false when argv is not a
// QEMU system emulator. A -uuid that is not a UUID is ignored.
func parseQEMU(argv []string) (g guest, ok bool) {
	if len(argv) == 0 || !isQEMU(argv[0]) {
		return guest{}, false
	}
	for i := 1; i+1 < len(argv); i++ {
		if !strings.HasPrefix(argv[i], "-") {
			continue
		}
		opt := strings.TrimPrefix(strings.TrimPrefix(argv[i], "-"), "-")
		val := argv[i+1]
		switch opt {
		case "name":
			if n := qemuOpts(val, "guest")["guest"]; n != "" {
				g.name = n
			}
			i++
		case "uuid":
			if uuidRE.MatchString(val) {
				g.uuid = strings.ToLower(val)
			}
			i++
		case "smbios":
			o := qemuOpts(val, "")
			if o["type"] == "1" && g.uuid == "" && uuidRE.MatchString(o["uuid"]) {
				g.uuid = strings.ToLower(o["uuid"])
			}
			i++
		}
	}
	return g, true
}

// libvirt puts each domain's processes in a machine cgroup:
//
//	systemd:      /machine.slice/machine-qemu\x2d<id>\x2d<name>.scope[/...]
//	no systemd:   /machine/qemu-<id>-<name>.libvirt-qemu[/...]
//
// with <name> escaped by systemd (\xNN, '-' as \x2d) and possibly cut.
var (
	scopeRE   = regexp.MustCompile(`(?:^|/)machine-qemu\\x2d(\d+)\\x2d([^/]+)\.scope(?:/|$)`)
	machineRE = regexp.MustCompile(`(?:^|/)machine/qemu-(\d+)-([^/]+)\.libvirt-qemu(?:/|$)`)
)

// cgroupVMName finds the libvirt domain name in /proc/<pid>/cgroup text
// (any hierarchy); "" when the process is in no machine cgroup.
func cgroupVMName(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			return "", fmt.Errorf("cgroup line %q: want id:controllers:path", sc.Text())
		}
		if m := scopeRE.FindStringSubmatch(parts[2]); m != nil {
			return unescapeSystemd(m[2]), nil
		}
		if m := machineRE.FindStringSubmatch(parts[2]); m != nil {
			return m[2], nil
		}
	}
	return "", sc.Err()
}

// unescapeSystemd undoes systemd's unit name escaping (\xNN).
func unescapeSystemd(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
