package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Params are a probe's run-time parameters, gala-gopher's "params" section.
// Units are gala-gopher's: see the field comments.
type Params struct {
	ReportPeriod       int // s
	SamplePeriod       int // ms
	LatencyThr         int // ms
	OfflineThr         int // ms
	DropsThr           int // packets
	ResLowerThr        int // %
	ResUpperThr        int // %
	ReportEvent        int // 0/1
	RingbufMapSize     int // MB
	ReportCport        int // 0/1
	L7Protocol         []string
	SupportSSL         int
	ClusterIPBackend   int
	PyroscopeServer    string
	SvgPeriod          int // s
	PerfSamplePeriod   int // ms
	MultiInstance      int
	NativeStack        int
	OutputDir          string
	FlameDir           string
	DevName            string
	ContinuousSampling int
	ElfPath            string
	KafkaPort          int
	CadvisorPort       int
	ProfilingChannel   string
	MinExecDur         int // µs
	MinAggrDur         int // ms
	CustomParam        map[string]string
}

// DefaultParams are gala-gopher's defaults.
func DefaultParams() Params {
	return Params{
		ReportPeriod:     60,
		SamplePeriod:     5000,
		RingbufMapSize:   1,
		PyroscopeServer:  "localhost:4040",
		SvgPeriod:        180,
		PerfSamplePeriod: 10,
		FlameDir:         "/var/log/gala-gopher/flamegraph",
		KafkaPort:        9092,
		CadvisorPort:     8083,
		ProfilingChannel: "local",
		MinExecDur:       1,
		MinAggrDur:       100,
	}
}

// Period is ReportPeriod as a duration.
func (p Params) Period() time.Duration { return time.Duration(p.ReportPeriod) * time.Second }

// paramKind is the JSON type a key accepts.
type paramKind uint8

const (
	pNum paramKind = iota
	pStr
	pArr
)

type paramSpec struct {
	key      string
	kind     paramKind
	min, max int
	// check validates a string value (after the type check).
	check func(key, v string) error
	// apply stores the (validated) value.
	apply func(p *Params, v any)
	// get reads the value for GET; echo says for which features.
	get  func(p *Params) any
	echo func(feature string, p *Params) bool
}

func always(string, *Params) bool { return true }
func echoFor(names ...string) func(string, *Params) bool {
	return func(f string, _ *Params) bool { return slices.Contains(names, f) }
}
func echoNonZero(get func(*Params) int) func(string, *Params) bool {
	return func(_ string, p *Params) bool { return get(p) != 0 }
}

func numSpec(key string, min, max int, field func(*Params) *int, echo func(string, *Params) bool) paramSpec {
	return paramSpec{
		key: key, kind: pNum, min: min, max: max,
		apply: func(p *Params, v any) { *field(p) = v.(int) },
		get:   func(p *Params) any { return *field(p) },
		echo:  echo,
	}
}

func strSpec(key string, check func(key, v string) error, field func(*Params) *string, echo func(string, *Params) bool) paramSpec {
	return paramSpec{
		key: key, kind: pStr, check: check,
		apply: func(p *Params, v any) { *field(p) = v.(string) },
		get:   func(p *Params) any { return *field(p) },
		echo:  echo,
	}
}

func maxLen(n int) func(key, v string) error {
	return func(key, v string) error {
		if len(v) >= n {
			return fmt.Errorf("params.%s value is too long, len must be less than %d", key, n)
		}
		return nil
	}
}

// unsafeChars are the characters gala-gopher refuses in path parameters.
const unsafeChars = "|;&$><()?*'`[]\\!\n"

func existingPath(n int) func(key, v string) error {
	return func(key, v string) error {
		if err := maxLen(n)(key, v); err != nil {
			return err
		}
		if strings.ContainsAny(v, unsafeChars) || strings.Contains(v, "./") || strings.Contains(v, "/.") {
			return fmt.Errorf("params.%s contains unsafe characters", key)
		}
		if v == "" {
			return nil // empty means "use the default location"
		}
		if _, err := os.Stat(filepath.Clean(v)); err != nil {
			return fmt.Errorf("params.%s path %s does not exist", key, v)
		}
		return nil
	}
}

func oneOf(vals ...string) func(key, v string) error {
	return func(key, v string) error {
		if !slices.Contains(vals, v) {
			return fmt.Errorf("params.%s invalid value %s, must be one of %s", key, v, strings.Join(vals, ", "))
		}
		return nil
	}
}

// l7Protocols are the accepted l7_protocol names: gala-gopher's, and
// galago's memcached.
var l7Protocols = []string{"http", "dns", "redis", "mysql", "pgsql", "kafka", "mongo", "crpc", "memcached"}

var flamegraphOnly = echoFor("flamegraph")

// paramSpecs is gala-gopher's param_keys[] table, in its order.
var paramSpecs = []paramSpec{
	numSpec("report_period", 5, 600, func(p *Params) *int { return &p.ReportPeriod }, always),
	numSpec("sample_period", 100, 10000, func(p *Params) *int { return &p.SamplePeriod }, echoFor("io", "tcp")),
	numSpec("latency_thr", 10, 100000, func(p *Params) *int { return &p.LatencyThr }, echoNonZero(func(p *Params) int { return p.LatencyThr })),
	numSpec("offline_thr", 10, 100000, func(p *Params) *int { return &p.OfflineThr }, echoNonZero(func(p *Params) int { return p.OfflineThr })),
	numSpec("drops_thr", 10, 100000, func(p *Params) *int { return &p.DropsThr }, echoNonZero(func(p *Params) int { return p.DropsThr })),
	numSpec("res_lower_thr", 0, 100, func(p *Params) *int { return &p.ResLowerThr }, always),
	numSpec("res_upper_thr", 0, 100, func(p *Params) *int { return &p.ResUpperThr }, always),
	numSpec("report_event", 0, 1, func(p *Params) *int { return &p.ReportEvent }, always),
	numSpec("ringbuf_map_size", 1, 32, func(p *Params) *int { return &p.RingbufMapSize }, echoFor("tcp", "socket")),
	numSpec("report_cport", 0, 1, func(p *Params) *int { return &p.ReportCport }, echoFor("tcp")),
	{
		key: "l7_protocol", kind: pArr,
		apply: func(p *Params, v any) { p.L7Protocol = v.([]string) },
		get:   func(p *Params) any { return p.L7Protocol },
		echo:  echoFor("l7"),
	},
	numSpec("support_ssl", 0, 1, func(p *Params) *int { return &p.SupportSSL }, echoFor("l7", "kafka")),
	numSpec("cluster_ip_backend", 0, 2, func(p *Params) *int { return &p.ClusterIPBackend }, echoFor("tcp", "l7")),
	strSpec("pyroscope_server", maxLen(64), func(p *Params) *string { return &p.PyroscopeServer }, flamegraphOnly),
	numSpec("svg_period", 30, 600, func(p *Params) *int { return &p.SvgPeriod }, flamegraphOnly),
	numSpec("perf_sample_period", 10, 1000, func(p *Params) *int { return &p.PerfSamplePeriod }, flamegraphOnly),
	numSpec("multi_instance", 0, 1, func(p *Params) *int { return &p.MultiInstance }, flamegraphOnly),
	numSpec("native_stack", 0, 1, func(p *Params) *int { return &p.NativeStack }, flamegraphOnly),
	strSpec("output_dir", existingPath(256), func(p *Params) *string { return &p.OutputDir }, flamegraphOnly),
	strSpec("flame_dir", existingPath(256), func(p *Params) *string { return &p.FlameDir }, flamegraphOnly),
	strSpec("dev_name", maxLen(32), func(p *Params) *string { return &p.DevName }, echoFor("io", "kafka", "ksli", "postgre_sli", "baseinfo", "tcp")),
	numSpec("continuous_sampling", 0, 1, func(p *Params) *int { return &p.ContinuousSampling }, echoFor("ksli")),
	strSpec("elf_path", existingPath(512), func(p *Params) *string { return &p.ElfPath }, echoFor("baseinfo", "nginx")),
	numSpec("kafka_port", 1, 65535, func(p *Params) *int { return &p.KafkaPort }, echoFor("kafka")),
	numSpec("cadvisor_port", 1, 65535, func(p *Params) *int { return &p.CadvisorPort }, echoFor("container")),
	strSpec("profiling_channel", oneOf("local", "kafka"), func(p *Params) *string { return &p.ProfilingChannel }, func(string, *Params) bool { return false }),
	numSpec("min_exec_dur", 0, 1000000, func(p *Params) *int { return &p.MinExecDur }, func(string, *Params) bool { return false }),
	numSpec("min_aggr_dur", 10, 10000, func(p *Params) *int { return &p.MinAggrDur }, func(string, *Params) bool { return false }),
}

// zeroMeansDefault are keys where 0 restores the default instead of failing
// the range check.
var zeroMeansDefault = map[string]func(p *Params){
	"svg_period":         func(p *Params) { p.SvgPeriod = DefaultParams().SvgPeriod },
	"perf_sample_period": func(p *Params) { p.PerfSamplePeriod = DefaultParams().PerfSamplePeriod },
}

// jsonNumber converts a decoded JSON value to an integer the way jsoncpp's
// isNumeric/asInt does: numbers and booleans are numbers.
func jsonNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func formatNum(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%g", f)
}

// ApplyParams merges the JSON object raw into p, key by key in gala-gopher's
// order. It returns an error wrapping ErrBadRequest when no key is
// recognised. running says whether the probe runs (ringbuf_map_size may
// only change while stopped). custom lists the custom_param names a custom
// probe declares (nil for built-ins, which reject custom_param).
func ApplyParams(p *Params, raw map[string]json.RawMessage, running bool, custom []string) error {
	recognised := 0
	for _, spec := range paramSpecs {
		r, ok := raw[spec.key]
		if !ok {
			continue
		}
		recognised++
		if !textOK(r) {
			return fmt.Errorf("params.%s invalid value: not valid UTF-8 text", spec.key)
		}
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return fmt.Errorf("params.%s invalid data type", spec.key)
		}
		if err := applyOne(p, spec, v, running); err != nil {
			return err
		}
	}
	if r, ok := raw["custom_param"]; ok && custom != nil {
		recognised++
		if !textOK(r) {
			return errors.New("params.custom_param invalid value: not valid UTF-8 text")
		}
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return errors.New("params.custom_param invalid data type")
		}
		if err := applyCustom(p, v, custom); err != nil {
			return err
		}
	}
	if recognised == 0 {
		if len(raw) == 0 {
			return fmt.Errorf("%w: params is empty; give at least one parameter, e.g. report_period", ErrBadRequest)
		}
		return fmt.Errorf("%w: params has no parameter galago knows (got %s)", ErrBadRequest, strings.Join(slices.Sorted(maps.Keys(raw)), ", "))
	}
	return nil
}

// typeName names a decoded JSON value's type for messages.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func applyOne(p *Params, spec paramSpec, v any, running bool) error {
	invalidType := func(want string) error {
		return fmt.Errorf("params.%s invalid data type: want %s, got %s", spec.key, want, typeName(v))
	}
	switch spec.kind {
	case pNum:
		f, ok := jsonNumber(v)
		if !ok {
			return invalidType("a number")
		}
		if f == 0 {
			if reset, ok := zeroMeansDefault[spec.key]; ok {
				reset(p)
				return nil
			}
		}
		if f != math.Trunc(f) || f < float64(spec.min) || f > float64(spec.max) {
			msg := fmt.Sprintf("params.%s invalid value %s, must be in [%d, %d]", spec.key, formatNum(f), spec.min, spec.max)
			if f != math.Trunc(f) {
				msg += ": not an integer"
			}
			return errors.New(msg)
		}
		n := int(f)
		if spec.key == "ringbuf_map_size" {
			if n&(n-1) != 0 {
				return fmt.Errorf("params.%s invalid value %d, must be a power of 2", spec.key, n)
			}
			if running && n != p.RingbufMapSize {
				return fmt.Errorf("params.%s can only be changed while the probe is stopped", spec.key)
			}
		}
		spec.apply(p, n)
	case pStr:
		s, ok := v.(string)
		if !ok {
			return invalidType("a string")
		}
		if spec.check != nil {
			if err := spec.check(spec.key, s); err != nil {
				return err
			}
		}
		spec.apply(p, s)
	case pArr:
		arr, ok := v.([]any)
		if !ok {
			return invalidType("an array of protocol names")
		}
		out := make([]string, 0, len(arr))
		for _, e := range arr {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("params.%s invalid data type: want an array of protocol names, got %s in it", spec.key, typeName(e))
			}
			s = strings.ToLower(s)
			if !slices.Contains(l7Protocols, s) {
				return fmt.Errorf("params.%s invalid value %s, must be one of %s", spec.key, s, strings.Join(l7Protocols, ", "))
			}
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		spec.apply(p, out)
	}
	return nil
}

func applyCustom(p *Params, v any, declared []string) error {
	const want = `want an array of {"<name>":"<value>"} objects`
	arr, ok := v.([]any)
	if !ok {
		return fmt.Errorf("params.custom_param invalid data type: %s, got %s", want, typeName(v))
	}
	out := make(map[string]string, len(arr))
	for _, e := range arr {
		obj, ok := e.(map[string]any)
		if !ok {
			return fmt.Errorf("params.custom_param invalid data type: %s, got %s in it", want, typeName(e))
		}
		for name, val := range obj {
			s, ok := val.(string)
			if !ok {
				return fmt.Errorf("params.custom_param invalid data type: the value of %s is %s, want a string", name, typeName(val))
			}
			if !slices.Contains(declared, name) {
				return fmt.Errorf("params.custom_param %s is not declared for this probe", name)
			}
			if len(s) > 64 {
				return fmt.Errorf("params.custom_param value is too long, len must be less than 65")
			}
			out[name] = s
		}
	}
	p.CustomParam = out
	return nil
}

// EchoParams is the "params" object of GET /<feature>.
func EchoParams(feature string, p *Params) map[string]any {
	out := map[string]any{}
	for _, spec := range paramSpecs {
		if spec.echo(feature, p) {
			v := spec.get(p)
			if l, ok := v.([]string); ok && l == nil {
				v = []string{}
			}
			out[spec.key] = v
		}
	}
	if len(p.CustomParam) > 0 {
		arr := make([]map[string]string, 0, len(p.CustomParam))
		keys := make([]string, 0, len(p.CustomParam))
		for k := range p.CustomParam {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			arr = append(arr, map[string]string{k: p.CustomParam[k]})
		}
		out["custom_param"] = arr
	}
	return out
}
