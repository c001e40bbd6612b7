package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/galago-project/galago/internal/snoop"
)

// Desired is the configuration the control plane asked for, one per feature:
// what GET echoes and what probes.init persists.
type Desired struct {
	Configured bool
	SubItems   uint32
	Bin        string
	Mode       snoop.Mode
	Snoopers   snoop.Selectors // whitelist, or the blacklist in Blacklist mode
	// CustomLabels are added to every record of the feature; PodLabels name
	// Kubernetes pod labels to add to pod metrics.
	CustomLabels map[string]string
	PodLabels    []string
	Params       Params
	Running      bool
}

func (d Desired) clone() Desired {
	c := d
	c.Snoopers = cloneSelectors(d.Snoopers)
	c.CustomLabels = maps.Clone(d.CustomLabels)
	c.PodLabels = slices.Clone(d.PodLabels)
	c.Params.L7Protocol = slices.Clone(d.Params.L7Protocol)
	c.Params.CustomParam = maps.Clone(d.Params.CustomParam)
	return c
}

func cloneSelectors(s snoop.Selectors) snoop.Selectors {
	out := snoop.Selectors{
		ProcID:        slices.Clone(s.ProcID),
		PodID:         slices.Clone(s.PodID),
		ContainerID:   slices.Clone(s.ContainerID),
		ContainerName: slices.Clone(s.ContainerName),
	}
	for _, p := range s.ProcName {
		p.Label = maps.Clone(p.Label)
		out.ProcName = append(out.ProcName, p)
	}
	return out
}

// maxLabels is gala-gopher's limit on custom_labels and pod_labels.
const maxLabels = 10

// applyRequest merges a PUT body into d in gala-gopher's section order (cmd,
// snoopers, blacklist, params, state). It works on a copy: on any error the
// caller keeps the old configuration, which is gala-gopher's rollback.
func applyRequest(f *Feature, d Desired, body []byte, running bool) (Desired, error) {
	var req map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil || req == nil || dec.More() {
		return d, errors.New("invalid json format")
	}
	next := d.clone()
	if raw, ok := req["cmd"]; ok {
		if err := applyCmd(f, &next, raw); err != nil {
			return d, err
		}
	}
	white, hasWhite := req["snoopers"]
	black, hasBlack := req["blacklist"]
	if hasWhite || hasBlack {
		if f.Snooper == SnooperNone {
			// gala-gopher accepts and ignores selectors for features that
			// observe the whole host; so do we.
			hasWhite, hasBlack = false, false
		}
	}
	if hasWhite {
		sel, custom, podLabels, err := parseSelectors(white, true)
		if err != nil {
			return d, err
		}
		if !sel.Empty() || next.Mode == snoop.Whitelist {
			next.Mode, next.Snoopers = snoop.Whitelist, sel
		}
		if custom != nil {
			next.CustomLabels = custom
		}
		if podLabels != nil {
			next.PodLabels = podLabels
		}
	}
	if hasBlack {
		sel, _, _, err := parseSelectors(black, false)
		if err != nil {
			return d, err
		}
		if hasWhite && next.Mode == snoop.Whitelist && !next.Snoopers.Empty() {
			if !sel.Empty() {
				return d, errors.New("snoopers and blacklist are mutually exclusive")
			}
		} else {
			next.Mode, next.Snoopers = snoop.Blacklist, sel
		}
	}
	if raw, ok := req["params"]; ok {
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return d, ErrBadRequest
		}
		var declared []string
		if f.Custom != nil {
			declared = f.Custom.Params
		}
		if err := ApplyParams(&next.Params, obj, running, declared); err != nil {
			return d, err
		}
	}
	if raw, ok := req["state"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return d, fmt.Errorf("invalid state %s: must be running or stopped", string(raw))
		}
		switch s {
		case "running":
			next.Running = true
		case "stopped":
			next.Running = false
		default:
			return d, fmt.Errorf("invalid state %s: must be running or stopped", s)
		}
	}
	if next.Running {
		if len(f.SubItems) > 0 && next.SubItems == 0 {
			return d, errors.New("invalid probe ranges: at least one must be set")
		}
		if f.Snooper != SnooperNone && next.Mode == snoop.Whitelist && next.Snoopers.Empty() {
			return d, fmt.Errorf("the snooper for %s cannot be empty", f.Name)
		}
	}
	next.Configured = true
	return next, nil
}

func applyCmd(f *Feature, d *Desired, raw json.RawMessage) error {
	var cmd struct {
		Probe *[]json.RawMessage `json:"probe"`
		Bin   *string            `json:"bin"`
	}
	if err := json.Unmarshal(raw, &cmd); err != nil || cmd.Probe == nil {
		return ErrBadRequest
	}
	if f.Custom != nil {
		if cmd.Bin != nil && *cmd.Bin != f.Custom.Bin {
			return fmt.Errorf("cmd.bin %s does not match the bin declared for %s", *cmd.Bin, f.Name)
		}
		d.Bin = f.Custom.Bin
	}
	var bits uint32
	for _, r := range *cmd.Probe {
		var name string
		if err := json.Unmarshal(r, &name); err != nil {
			return ErrBadRequest
		}
		bit, ok := f.SubItemBit(name)
		if !ok {
			return fmt.Errorf("unsupported probe range: %s.", name) //nolint:staticcheck // gala-gopher's exact text
		}
		bits |= bit
	}
	d.SubItems = bits
	return nil
}

// parseSelectors decodes a snoopers or blacklist object. Each field is
// decoded on its own so a type error names the field, as gala-gopher does.
func parseSelectors(raw json.RawMessage, withLabels bool) (snoop.Selectors, map[string]string, []string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return snoop.Selectors{}, nil, nil, errors.New("Error occurs when parsing snooper") //nolint:staticcheck // gala-gopher's text
	}
	var sel snoop.Selectors
	var custom map[string]string
	var podLabels []string
	fields := []struct {
		name string
		dst  any
	}{
		{"proc_id", &sel.ProcID},
		{"proc_name", &sel.ProcName},
		{"pod_id", &sel.PodID},
		{"container_id", &sel.ContainerID},
		{"container_name", &sel.ContainerName},
	}
	if withLabels {
		fields = append(fields,
			struct {
				name string
				dst  any
			}{"custom_labels", &custom},
			struct {
				name string
				dst  any
			}{"pod_labels", &podLabels})
	}
	for _, fld := range fields {
		v, ok := obj[fld.name]
		if !ok {
			continue
		}
		if err := json.Unmarshal(v, fld.dst); err != nil {
			return snoop.Selectors{}, nil, nil, fmt.Errorf("Error occurs when parsing snooper %s", fld.name) //nolint:staticcheck // gala-gopher's text
		}
	}
	if len(custom) > maxLabels {
		return snoop.Selectors{}, nil, nil, fmt.Errorf("Error occurs when parsing snooper custom_labels: at most %d labels", maxLabels) //nolint:staticcheck // gala-gopher's text
	}
	if len(podLabels) > maxLabels {
		return snoop.Selectors{}, nil, nil, fmt.Errorf("Error occurs when parsing snooper pod_labels: at most %d labels", maxLabels) //nolint:staticcheck // gala-gopher's text
	}
	if err := sel.Validate(); err != nil {
		return snoop.Selectors{}, nil, nil, err
	}
	return sel, custom, podLabels, nil
}

// encodeDesired renders GET /<feature> as gala-gopher does: compact JSON with
// sorted keys and a trailing newline; "{}" for a feature never configured.
func encodeDesired(f *Feature, d Desired) []byte {
	if !d.Configured {
		return []byte("{}\n")
	}
	probes := f.SubItemNames(d.SubItems)
	out := map[string]any{
		"cmd":    map[string]any{"bin": d.Bin, "probe": probes},
		"params": EchoParams(f.Name, &d.Params),
		"state":  stateName(d.Running),
	}
	sel := map[string]any{}
	if !d.Snoopers.Empty() {
		names := make([]map[string]string, 0, len(d.Snoopers.ProcName))
		for _, p := range d.Snoopers.ProcName {
			names = append(names, map[string]string{"comm": p.Comm, "cmdline": p.Cmdline})
		}
		sel = map[string]any{
			"proc_id":        orEmpty(d.Snoopers.ProcID),
			"proc_name":      names,
			"pod_id":         orEmpty(d.Snoopers.PodID),
			"container_id":   orEmpty(d.Snoopers.ContainerID),
			"container_name": orEmpty(d.Snoopers.ContainerName),
		}
	}
	if d.Mode == snoop.Blacklist {
		out["blacklist"] = sel
	} else if f.Snooper != SnooperNone {
		out["snoopers"] = sel
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // comm expressions keep their <, > and &
	if err := enc.Encode(out); err != nil {
		// Only plain maps, slices and strings are encoded here.
		panic(err)
	}
	return buf.Bytes() // Encode adds the trailing newline
}

func stateName(running bool) string {
	if running {
		return "running"
	}
	return "stopped"
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
