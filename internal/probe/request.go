package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

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
//
// Error messages start with gala-gopher's text for the case and go on with
// what was wrong, so a script matching gala-gopher's text still matches and
// a person reading it learns the reason.
func applyRequest(f *Feature, d Desired, body []byte, running bool) (Desired, error) {
	var req map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return d, fmt.Errorf("invalid json format: %s", jsonErr(err))
	}
	if req == nil {
		return d, errors.New("invalid json format: the body is null, want an object")
	}
	if dec.More() {
		return d, errors.New("invalid json format: more than one JSON value")
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
		sel, custom, podLabels, err := parseSelectors("snoopers", white)
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
		sel, _, _, err := parseSelectors("blacklist", black)
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
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return d, fmt.Errorf("%w: params must be an object, got %s", ErrBadRequest, jsonKind(raw))
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
		if f.Snooper != SnooperNone && next.Mode == snoop.Whitelist && next.Snoopers.Empty() && next.SubItems&f.SystemItems == 0 {
			msg := fmt.Sprintf("the snooper for %s cannot be empty: give snoopers, or \"blacklist\":{} to observe every process", f.Name)
			if f.SystemItems != 0 {
				msg += fmt.Sprintf(" (without them only %s collect)", strings.Join(f.SubItemNames(f.SystemItems), ", "))
			}
			return d, errors.New(msg)
		}
	}
	next.Configured = true
	return next, nil
}

// observesNothing lists the enabled sub-items of a running feature that
// select processes while its whitelist is empty: they collect nothing until
// snoopers or a blacklist are given.
func observesNothing(f *Feature, d Desired) []string {
	if !d.Running || f.Snooper == SnooperNone || d.Mode != snoop.Whitelist || !d.Snoopers.Empty() {
		return nil
	}
	names := f.SubItemNames(d.SubItems &^ f.SystemItems)
	if len(names) == 0 {
		return nil
	}
	return names
}

func applyCmd(f *Feature, d *Desired, raw json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return fmt.Errorf("%w: cmd must be an object, got %s", ErrBadRequest, jsonKind(raw))
	}
	rawProbe, ok := obj["probe"]
	if !ok {
		return fmt.Errorf("%w: cmd has no \"probe\" list of sub-items", ErrBadRequest)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(rawProbe, &list); err != nil || list == nil {
		return fmt.Errorf("%w: cmd.probe must be an array of sub-item names, got %s", ErrBadRequest, jsonKind(rawProbe))
	}
	if f.Custom != nil {
		if rawBin, ok := obj["bin"]; ok {
			var bin string
			if err := json.Unmarshal(rawBin, &bin); err != nil {
				return fmt.Errorf("%w: cmd.bin must be a string, got %s", ErrBadRequest, jsonKind(rawBin))
			}
			if bin != f.Custom.Bin || !textOK(rawBin) {
				return fmt.Errorf("cmd.bin %s does not match the bin declared for %s", bin, f.Name)
			}
		}
		d.Bin = f.Custom.Bin
	}
	var bits uint32
	for _, r := range list {
		var name string
		if err := json.Unmarshal(r, &name); err != nil {
			return fmt.Errorf("%w: cmd.probe must be an array of sub-item names, got %s in it", ErrBadRequest, jsonKind(r))
		}
		bit, ok := f.SubItemBit(name)
		if !ok {
			msg := fmt.Sprintf("unsupported probe range: %s.", name)
			if len(f.SubItems) == 0 {
				msg += fmt.Sprintf(" %s has no sub-items", f.Name)
			} else {
				msg += " Known: " + strings.Join(f.SubItemNames(^uint32(0)), ", ")
			}
			return errors.New(msg)
		}
		bits |= bit
	}
	d.SubItems = bits
	return nil
}

// selectorFields are the keys of a snoopers or blacklist object.
var (
	selectorFields = []string{snoop.FieldProcID, snoop.FieldProcName, snoop.FieldPodID, snoop.FieldContainerID, snoop.FieldContainerName}
	labelFields    = []string{"custom_labels", "pod_labels"}
	// procNameKeys are the keys of a proc_name entry; gala-gopher reads
	// debugging_dir and ignores it.
	procNameKeys = []string{"comm", "cmdline", "label", "debugging_dir"}
)

// parseSelectors decodes the snoopers or blacklist object (section names
// which). Each field is decoded on its own so an error names the field, as
// gala-gopher does; unlike gala-gopher, an unknown field is refused rather
// than ignored, since a misspelt selector would silently select nothing.
func parseSelectors(section string, raw json.RawMessage) (snoop.Selectors, map[string]string, []string, error) {
	fail := func(field, format string, args ...any) (snoop.Selectors, map[string]string, []string, error) {
		return snoop.Selectors{}, nil, nil, &snoop.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return fail("", "%s must be an object of selector lists, got %s", section, jsonKind(raw))
	}
	known := selectorFields
	if section == "snoopers" {
		known = append(slices.Clone(selectorFields), labelFields...)
	}
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(known, name) {
			return fail(name, "not a field of %s (known: %s)", section, strings.Join(known, ", "))
		}
		if !textOK(obj[name]) {
			return fail(name, "not valid UTF-8 text: galago could not keep it unchanged")
		}
	}
	var sel snoop.Selectors
	var custom map[string]string
	var podLabels []string
	if v, ok := obj[snoop.FieldProcID]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return fail(snoop.FieldProcID, "want an array of pids, got %s", jsonKind(v))
		}
		for _, e := range list {
			var n json.Number
			if err := json.Unmarshal(e, &n); err != nil {
				return fail(snoop.FieldProcID, "%s is not a pid", e)
			}
			pid, err := strconv.ParseInt(n.String(), 10, 64)
			switch {
			case err != nil:
				return fail(snoop.FieldProcID, "%s is not a pid (a positive integer up to %d)", e, snoop.MaxPID)
			case pid <= 0:
				return fail(snoop.FieldProcID, "pid %d is not positive", pid)
			case pid > snoop.MaxPID:
				return fail(snoop.FieldProcID, "pid %d is above %d, the largest pid Linux allows", pid, snoop.MaxPID)
			}
			sel.ProcID = append(sel.ProcID, int(pid))
		}
	}
	if v, ok := obj[snoop.FieldProcName]; ok {
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return fail(snoop.FieldProcName, "want an array of {\"comm\", \"cmdline\", \"label\"} objects, got %s", jsonKind(v))
		}
		for _, e := range list {
			var p snoop.ProcName
			for _, k := range slices.Sorted(maps.Keys(e)) {
				var err error
				switch k {
				case "comm":
					err = json.Unmarshal(e[k], &p.Comm)
				case "cmdline":
					err = json.Unmarshal(e[k], &p.Cmdline)
				case "label":
					err = json.Unmarshal(e[k], &p.Label)
				case "debugging_dir":
				default:
					return fail(snoop.FieldProcName, "unknown key %q (known: %s)", k, strings.Join(procNameKeys, ", "))
				}
				if err != nil {
					want := "a string"
					if k == "label" {
						want = "an object of strings"
					}
					return fail(snoop.FieldProcName, "%s must be %s, got %s", k, want, jsonKind(e[k]))
				}
			}
			sel.ProcName = append(sel.ProcName, p)
		}
	}
	strList := func(field string, dst *[]string) error {
		v, ok := obj[field]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return &snoop.ValidationError{Field: field, Reason: fmt.Sprintf("want an array of strings, got %s", describeList(v))}
		}
		return nil
	}
	for _, f := range []struct {
		name string
		dst  *[]string
	}{{snoop.FieldPodID, &sel.PodID}, {snoop.FieldContainerID, &sel.ContainerID}, {snoop.FieldContainerName, &sel.ContainerName}, {"pod_labels", &podLabels}} {
		if err := strList(f.name, f.dst); err != nil {
			return snoop.Selectors{}, nil, nil, err
		}
	}
	if v, ok := obj["custom_labels"]; ok {
		if err := json.Unmarshal(v, &custom); err != nil {
			return fail("custom_labels", "want an object of string values, got %s", jsonKind(v))
		}
	}
	if len(custom) > maxLabels {
		return fail("custom_labels", "%d labels, at most %d", len(custom), maxLabels)
	}
	if len(podLabels) > maxLabels {
		return fail("pod_labels", "%d labels, at most %d", len(podLabels), maxLabels)
	}
	if err := sel.Validate(); err != nil {
		return snoop.Selectors{}, nil, nil, err
	}
	return sel, custom, podLabels, nil
}

// jsonKind names the type of a JSON value for messages.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// describeList names what is wrong with a value that should be an array of
// strings: its type, or the first element that is not a string.
func describeList(raw json.RawMessage) string {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return jsonKind(raw)
	}
	for _, e := range list {
		if jsonKind(e) != "a string" {
			return fmt.Sprintf("%s in it", e)
		}
	}
	return jsonKind(raw)
}

// jsonErr words a JSON decoding error without Go type names.
func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("the body is a JSON %s, want an object", te.Value)
	}
	if errors.Is(err, io.EOF) {
		return "the body is empty"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of the body"
	}
	return err.Error()
}

// textOK reports whether the strings of a JSON value decode to exactly what
// they say: valid UTF-8 and no unpaired surrogate escape. Go's decoder turns
// either into U+FFFD, so such a value would be stored, echoed and saved
// changed. raw must be valid JSON; its backslashes are then all inside
// strings.
func textOK(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' || i+4 >= len(raw) {
			continue
		}
		r := hex4(raw[i+1 : i+5])
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		// A high surrogate followed by a low one is one code point.
		if r >= 0xDC00 || i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
			return false
		}
		if lo := hex4(raw[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
			return false
		}
		i += 6
	}
	return true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

// encodeDesired renders GET /<feature> as gala-gopher does: compact JSON with
// sorted keys and a trailing newline; "{}" for a feature never configured.
// GET does not echo labels (gala-gopher's answer); withLabels adds them
// (custom_labels, pod_labels and each proc_name's label), for the
// configuration saved to probes.init, which must re-apply whole.
func encodeDesired(f *Feature, d Desired, withLabels bool) []byte {
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
		names := make([]map[string]any, 0, len(d.Snoopers.ProcName))
		for _, p := range d.Snoopers.ProcName {
			n := map[string]any{"comm": p.Comm, "cmdline": p.Cmdline}
			if withLabels && len(p.Label) > 0 {
				n["label"] = p.Label
			}
			names = append(names, n)
		}
		sel = map[string]any{
			"proc_id":        orEmpty(d.Snoopers.ProcID),
			"proc_name":      names,
			"pod_id":         orEmpty(d.Snoopers.PodID),
			"container_id":   orEmpty(d.Snoopers.ContainerID),
			"container_name": orEmpty(d.Snoopers.ContainerName),
		}
	}
	// Labels only travel in "snoopers"; in blacklist mode they go in a
	// snoopers object of their own, which applyRequest reads before the
	// blacklist.
	labels := map[string]any{}
	if withLabels && len(d.CustomLabels) > 0 {
		labels["custom_labels"] = d.CustomLabels
	}
	if withLabels && len(d.PodLabels) > 0 {
		labels["pod_labels"] = d.PodLabels
	}
	switch {
	case d.Mode == snoop.Blacklist:
		out["blacklist"] = sel
		if len(labels) > 0 {
			out["snoopers"] = labels
		}
	case f.Snooper != SnooperNone:
		maps.Copy(sel, labels)
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
