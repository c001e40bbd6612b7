package instmeta

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode"

	"github.com/galago-project/galago/internal/procfs"
)

// DMIAttrs are the /sys/class/dmi/id attributes read, in label order.
var DMIAttrs = []string{
	"sys_vendor", "product_name", "product_version", "product_serial", "product_uuid",
	"board_vendor", "board_name", "board_serial", "board_asset_tag",
	"bios_vendor", "bios_version", "chassis_vendor", "chassis_asset_tag",
}

// Meta is what was found; a field that is unknown is "".
type Meta struct {
	DMI           map[string]string // attribute -> cleaned value, only the ones found
	Hypervisor    string            // systemd-detect-virt's names: kvm, qemu, amazon, microsoft, vmware, xen, oracle, ...; "" on bare metal
	CloudProvider string            // aws, gcp, azure, alibaba, oracle, tencent, huawei, digitalocean, hetzner, openstack, ...
	InstanceType  string
	InstanceID    string
	Region, Zone  string
	// Missing says, per part, why it is absent ("dmi": no /sys/class/dmi/id,
	// ...), for one log line.
	Missing map[string]string
}

// placeholders are values vendors leave in DMI fields they do not fill.
var placeholders = map[string]bool{
	"to be filled by o.e.m.": true, "to be filled by oem": true, "default string": true,
	"not specified": true, "not applicable": true, "none": true, "n/a": true, "na": true,
	"system product name": true, "system manufacturer": true, "system version": true,
	"system serial number": true, "0123456789": true, "o.e.m.": true, "oem": true, "unknown": true,
	"03000200-0400-0500-0006-000700080009": true, "00000000-0000-0000-0000-000000000000": true,
}

// CleanDMI trims a DMI string, drops control characters and returns ""
// for placeholders.
func CleanDMI(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, s)
	if len(s) > 128 {
		s = strings.ToValidUTF8(s[:128], "") // a rune cut in two goes
	}
	s = strings.TrimSpace(s)
	if placeholders[strings.ToLower(s)] || strings.Trim(s, "0xXfF. -") == "" {
		return ""
	}
	return s
}

// Read gathers the metadata of the host under fsys.
func Read(fsys procfs.FS) Meta {
	m := Meta{DMI: map[string]string{}, Missing: map[string]string{}}
	if _, err := os.Stat(fsys.Path("/sys/class/dmi/id")); err != nil {
		m.Missing["dmi"] = "no /sys/class/dmi/id (" + err.Error() + "): the machine exposes no DMI/SMBIOS"
	} else {
		var unreadable []string
		for _, a := range DMIAttrs {
			v, err := fsys.DMI(a)
			switch {
			case err == nil:
				if v = CleanDMI(v); v != "" {
					m.DMI[a] = v
				}
			case errors.Is(err, fs.ErrPermission):
				unreadable = append(unreadable, a)
			}
		}
		if len(unreadable) > 0 {
			m.Missing["dmi_root_only"] = strings.Join(unreadable, ", ") + " are readable by root only"
		}
	}
	m.Hypervisor = DetectHypervisor(fsys, CPUIDSignature).Name
	m.CloudProvider, m.InstanceType, m.InstanceID = cloud(m.DMI)
	labels, err := kubeletNodeLabels(fsys)
	if err != nil {
		m.Missing["node_labels"] = err.Error()
	}
	m.Region = first(labels, "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
	m.Zone = first(labels, "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
	if m.CloudProvider != "" && (m.Region == "" || m.InstanceID == "") {
		m.Missing["cloud"] = "the " + m.CloudProvider + " instance metadata service is not queried (no network calls): region, zone and instance id come only from DMI and kubelet node labels"
	}
	return m
}

func first(m map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := m[k]; v != "" {
			return v
		}
	}
	return ""
}

// cloud names the provider, instance type and id that DMI tells.
func cloud(dmi map[string]string) (provider, instanceType, instanceID string) {
	vendor, product := dmi["sys_vendor"], dmi["product_name"]
	bios, asset, chassisAsset := dmi["bios_version"], dmi["board_asset_tag"], dmi["chassis_asset_tag"]
	switch {
	case vendor == "Amazon EC2": // Nitro: the type is the product name, the id the board asset tag
		id := ""
		if strings.HasPrefix(asset, "i-") {
			id = asset
		}
		return "aws", product, id
	case strings.Contains(strings.ToLower(bios), "amazon"): // Xen-based EC2
		return "aws", "", ""
	case vendor == "Google" || product == "Google Compute Engine":
		return "gcp", "", ""
	case chassisAsset == "7783-7084-3265-9085-8269-3286-77": // Azure's fixed asset tag
		return "azure", "", ""
	case vendor == "Alibaba Cloud" || product == "Alibaba Cloud ECS":
		return "alibaba", "", ""
	case chassisAsset == "OracleCloud.com":
		return "oracle", "", ""
	case vendor == "Tencent Cloud":
		return "tencent", "", ""
	case chassisAsset == "HUAWEICLOUD" || strings.HasPrefix(vendor, "HUAWEICLOUD"):
		return "huawei", "", ""
	case vendor == "DigitalOcean":
		return "digitalocean", "", ""
	case vendor == "Hetzner":
		return "hetzner", "", ""
	case vendor == "Scaleway":
		return "scaleway", "", ""
	case strings.HasPrefix(product, "OpenStack"):
		return "openstack", "", ""
	}
	return "", "", ""
}

// kubeletFlagFiles hold the kubelet's extra flags on kubeadm, Debian/Ubuntu
// and RHEL-family nodes.
var kubeletFlagFiles = []string{"/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet", "/etc/sysconfig/kubelet"}

// kubeletNodeLabels reads --node-labels from the kubelet's flag files.
func kubeletNodeLabels(fsys procfs.FS) (map[string]string, error) {
	found := false
	out := map[string]string{}
	for _, f := range kubeletFlagFiles {
		fh, err := os.Open(fsys.Path(f))
		if err != nil {
			continue
		}
		found = true
		for k, v := range ParseNodeLabels(fh) {
			out[k] = v
		}
		fh.Close()
	}
	if !found {
		return nil, errors.New("no kubelet flag file (" + strings.Join(kubeletFlagFiles, ", ") + "): not a Kubernetes node, or its kubelet is configured elsewhere")
	}
	return out, nil
}

// ParseNodeLabels finds --node-labels=k=v,k2=v2 in a kubelet flag file.
func ParseNodeLabels(r io.Reader) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		for _, w := range strings.Fields(sc.Text()) {
			w = strings.Trim(w, `"'`)
			if i := strings.Index(w, "--node-labels="); i >= 0 {
				for _, kv := range strings.Split(strings.Trim(w[i+len("--node-labels="):], `"'`), ",") {
					if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
						out[k] = v
					}
				}
			}
		}
	}
	return out
}
