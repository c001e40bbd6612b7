package baseinfo

import (
	"strings"

	"github.com/galago-project/galago/internal/instmeta"
)

// instanceCollector fills host_instance once per period from facts read
// when the host sub-item starts (they do not change while the machine
// runs); what cannot be known is said in one log line.
type instanceCollector struct {
	meta *instmeta.Meta
}

func (ic *instanceCollector) forget() { ic.meta = nil }

func (ic *instanceCollector) sample(c *cycle) {
	if ic.meta == nil {
		m := instmeta.Read(c.fs)
		ic.meta = &m
		if len(m.Missing) > 0 {
			var why []string
			for _, k := range []string{"dmi", "dmi_root_only", "cloud", "node_labels"} {
				if w := m.Missing[k]; w != "" {
					why = append(why, w)
				}
			}
			c.warnOnce("instance.missing", "baseinfo: host_instance labels left unset", "reason", strings.Join(why, "; "))
		}
	}
	if !c.emit {
		return
	}
	h, err := c.fs.Hostname()
	if err != nil {
		c.failed("instance.hostname", "host_instance", err)
		return
	}
	m := ic.meta
	r := HostInstance.NewRecord(c.now, c.period)
	r.SetStr(HostInstance.MustIndex("hostname"), h)
	set := func(field, v string) {
		if v != "" {
			r.SetStr(HostInstance.MustIndex(field), v)
		}
	}
	for _, a := range instmeta.DMIAttrs {
		field := a
		if a == "product_uuid" {
			field = "system_uuid"
		}
		if HostInstance.HasField(field) {
			set(field, m.DMI[a])
		}
	}
	set("hypervisor", m.Hypervisor)
	set("cloud_provider", m.CloudProvider)
	set("instance_type", m.InstanceType)
	set("instance_id", m.InstanceID)
	set("region", m.Region)
	set("zone", m.Zone)
	r.SetNum(HostInstance.MustIndex("instance_info"), 1)
	c.rt.Record(r)
}
