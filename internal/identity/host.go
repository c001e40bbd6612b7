package identity

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/galago-project/galago/internal/procfs"
)

// HostInfo identifies the node, as gala-gopher's machine_id does.
type HostInfo struct {
	// UUID is the DMI product uuid, or /etc/machine-id when there is none.
	UUID string
	// IP is the first non-loopback IPv4 address of the host's interfaces;
	// "" if it has none.
	IP       string
	Hostname string
}

// MachineID is the machine_id label value: "<uuid>-<ip>".
func (h HostInfo) MachineID() string { return h.UUID + "-" + h.IP }

// Host reads the node's identity through root. The IP comes from this
// process's network namespace: in a container galago needs the host network
// (hostNetwork: true, as gala-gopher's daemonset has), otherwise the pod's
// address is reported.
func Host(root string) (HostInfo, error) {
	fs := procfs.FS{Root: root}
	uuid, err := hostUUID(fs)
	if err != nil {
		return HostInfo{}, err
	}
	h := HostInfo{UUID: uuid}
	if ifs, err := net.Interfaces(); err == nil {
		h.IP = firstIPv4(ifs, func(i net.Interface) ([]net.Addr, error) { return i.Addrs() })
	}
	h.Hostname, err = os.Hostname()
	if err != nil || h.Hostname == "" {
		h.Hostname, _ = fs.Hostname()
	}
	return h, nil
}

func hostUUID(fs procfs.FS) (string, error) {
	uuid, err := fs.DMI("product_uuid")
	if err == nil && uuid != "" {
		return uuid, nil
	}
	if err == nil {
		err = errors.New("empty")
	}
	id, err2 := fs.ReadHostFile("/etc/machine-id")
	if id = strings.TrimSpace(id); err2 == nil && id != "" {
		return id, nil
	}
	if err2 == nil {
		err2 = errors.New("empty")
	}
	return "", fmt.Errorf("host uuid: no DMI product_uuid (%w) nor machine-id (%w)", err, err2)
}

// firstIPv4 returns the first non-loopback IPv4 address in interface order.
func firstIPv4(ifs []net.Interface, addrs func(net.Interface) ([]net.Addr, error)) string {
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			continue
		}
		as, err := addrs(i)
		if err != nil {
			continue
		}
		for _, a := range as {
			var ip net.IP
			switch v := a.(type) {
			case *net.IPNet:
				ip = v.IP
			case *net.IPAddr:
				ip = v.IP
			}
			if ip4 := ip.To4(); ip4 != nil && !ip4.IsLoopback() {
				return ip4.String()
			}
		}
	}
	return ""
}
