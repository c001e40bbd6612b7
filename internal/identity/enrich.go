package identity

import (
	"sort"
	"strconv"

	"github.com/galago-project/galago/internal/table"
)

// Enricher adds gala-gopher's enrichment labels to records. After the
// record's own key and label fields come, in this order:
//
//  1. if the table has a tgid field: comm (unless the table has its own),
//     for entity "proc" cmdline (a java process's main class) and
//     start_time, the proc_name snooper labels of the process, and if the
//     process runs in a container container_id (abbreviated to 12 hex digits
//     like gala-gopher, unless the table has the field), container_name,
//     container_image, pod_id, pod ("<namespace>/<name>"), pod_namespace
//     and the pod_labels;
//  2. if the table has a container_id field: container_name,
//     container_image, pod_id, pod, pod_namespace and the pod_labels of
//     that container;
//  3. the probe's custom labels, sorted by name;
//  4. machine_id ("<uuid>-<ip>").
//
// pod_labels (the snooper option) add, for a container in a pod whose
// labels a CRI runtime gave, each requested key with the pod's value or
// "not found" as gala-gopher; when no runtime gave the pod's labels they
// are unknown and left out.
//
// A label whose value is unknown is left out rather than emitted empty, and
// no name is emitted twice: the record's own fields win, and snooper or
// custom labels never take one of the names above (a custom machine_id
// would otherwise hide the real one).
type Enricher struct {
	ids       Resolver
	machineID string
}

// NewEnricher returns an Enricher; r may be nil (only custom labels and
// machine_id are added then).
func NewEnricher(r Resolver, host HostInfo) *Enricher {
	return &Enricher{ids: r, machineID: host.MachineID()}
}

// labelSet accumulates labels, dropping empty values and repeated names.
type labelSet struct {
	t   *table.Table
	out []table.Label
}

func (s *labelSet) add(name, value string) {
	if value == "" {
		return
	}
	if i := s.t.Index(name); i >= 0 {
		if k := s.t.Fields[i].Kind; k == table.KindKey || k == table.KindLabel {
			return
		}
	}
	for _, l := range s.out {
		if l.Name == name {
			return
		}
	}
	s.out = append(s.out, table.Label{Name: name, Value: value})
}

// reserved are the names the enricher computes itself.
var reserved = map[string]bool{
	"comm": true, "cmdline": true, "start_time": true, "container_id": true,
	"container_name": true, "container_image": true, "pod_id": true, "pod": true,
	"pod_namespace": true, "machine_id": true,
}

// addUser adds user-given labels (snooper, custom) sorted by name, skipping
// reserved names.
func (s *labelSet) addUser(m map[string]string) {
	names := make([]string, 0, len(m))
	for k := range m {
		if !reserved[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		s.add(k, m[k])
	}
}

// Enrich implements table.Enricher.
func (e *Enricher) Enrich(r *table.Record, src *table.Source) []table.Label {
	s := labelSet{t: r.Table}
	if r.Table.HasField("tgid") {
		e.process(&s, r, src)
	}
	if r.Table.HasField("container_id") && e.ids != nil {
		if id := r.Str("container_id"); id != "" {
			if c, ok := e.ids.Container(id); ok {
				e.container(&s, c, src)
			}
		}
	}
	if src != nil {
		s.addUser(src.CustomLabels)
	}
	s.add("machine_id", e.machineID)
	return s.out
}

func (e *Enricher) process(s *labelSet, r *table.Record, src *table.Source) {
	pid, err := strconv.Atoi(r.Str("tgid"))
	if err != nil || pid <= 0 {
		return
	}
	var p Process
	var ok bool
	if e.ids != nil {
		p, ok = e.ids.Process(pid)
	}
	if ok {
		s.add("comm", p.Comm)
		if r.Table.Entity == "proc" {
			cmd := p.Cmdline
			if p.MainClass != "" {
				cmd = p.MainClass
			}
			s.add("cmdline", cmd)
			s.add("start_time", strconv.FormatUint(p.StartTime, 10))
		}
	}
	if src != nil && src.SnooperLabels != nil {
		s.addUser(src.SnooperLabels(pid))
	}
	if !ok || p.ContainerID == "" {
		return
	}
	s.add("container_id", ShortID(p.ContainerID))
	c, found := e.ids.Container(p.ContainerID)
	if !found {
		c = Container{ID: p.ContainerID}
	}
	if c.PodID == "" {
		c.PodID = p.PodID
	}
	e.container(s, c, src)
}

func (e *Enricher) container(s *labelSet, c Container, src *table.Source) {
	s.add("container_name", c.Name)
	s.add("container_image", c.Image)
	s.add("pod_id", c.PodID)
	if c.PodNamespace != "" && c.PodName != "" {
		s.add("pod", c.PodNamespace+"/"+c.PodName)
	}
	s.add("pod_namespace", c.PodNamespace)
	if src == nil || c.PodID == "" || c.PodLabels == nil {
		return
	}
	for _, k := range src.PodLabels {
		if reserved[k] {
			continue
		}
		v, ok := c.PodLabels[k]
		if !ok {
			v = "not found"
		}
		s.add(k, v)
	}
}
