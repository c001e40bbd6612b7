package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/libconfig"
)

const shippedConf = "../../deploy/package/gala-gopher.conf"

// values drops what Load records besides the values, so configs can be
// compared with Default().
func values(c *Config) Config {
	v := *c
	v.origin, v.warnings = nil, nil
	return v
}

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c, err := Parse("f.conf", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestShippedFileIsDefault(t *testing.T) {
	c, err := Load(shippedConf)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := values(c), values(Default()); !reflect.DeepEqual(got, want) {
		t.Errorf("shipped file loads to\n%+v\nwant Default()\n%+v", got, want)
	}
	if len(c.Warnings()) != 0 {
		t.Errorf("warnings: %q", c.Warnings())
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	// Every key of the schema is in the shipped file except galago's and
	// desc_language (older gala-gopher releases had it; current ones do not).
	for _, k := range schema {
		if _, ok := c.origin[k.path()]; ok == (k.section == "galago" || k.path() == "event.desc_language") {
			t.Errorf("%s: in file = %v", k.path(), ok)
		}
	}
	if got := c.origin["imdb.max_tables_num"]; got != shippedConf+":30" {
		t.Errorf("origin of imdb.max_tables_num = %q", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.conf")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Load(explicit missing path) error = %v", err)
	}
	// The default path may be missing: built-in defaults.
	c, err := loadFile(missing, true)
	if err != nil || !reflect.DeepEqual(values(c), values(Default())) {
		t.Errorf("loadFile(missing, default path) = %+v, %v", c, err)
	}
	// An unreadable default path is still an error.
	if _, err := loadFile(t.TempDir(), true); err == nil {
		t.Error("loading a directory: no error")
	}
}

func TestMissingKeysTakeDefaults(t *testing.T) {
	c := mustParse(t, "imdb = { max_tables_num = 10; };\nkafka = {};\n")
	want := Default()
	want.IMDB.MaxTablesNum = 10
	if !reflect.DeepEqual(values(c), values(want)) {
		t.Errorf("got %+v", values(c))
	}
	if len(c.Warnings()) != 0 {
		t.Errorf("warnings: %q", c.Warnings())
	}
}

func TestGlobalWithoutRestAPIOn(t *testing.T) {
	c := mustParse(t, "\nglobal = { log_level = \"debug\"; };\n")
	if c.Global.RestAPIOn {
		t.Error("rest_api_on absent from global: REST API on, want off as in gala-gopher")
	}
	if c.Global.LogLevel != "debug" {
		t.Errorf("log_level = %q", c.Global.LogLevel)
	}
	want := []string{"f.conf:2: global.rest_api_on absent: REST API off, as in gala-gopher"}
	if !reflect.DeepEqual(c.Warnings(), want) {
		t.Errorf("warnings %q, want %q", c.Warnings(), want)
	}
}

func TestUnknownKeysWarn(t *testing.T) {
	c := mustParse(t, `global = { log_level = "warn"; rest_api_on = false; pin_path = "/x"; };
probes = ( { name = "tcp"; } );
galago = { host_path = "/host"; extra = 1; };`)
	want := []string{
		"f.conf:1: unknown key global.pin_path ignored",
		"f.conf:2: unknown section probes ignored",
		"f.conf:3: unknown key galago.extra ignored",
	}
	if !reflect.DeepEqual(c.Warnings(), want) {
		t.Errorf("warnings\n%q\nwant\n%q", c.Warnings(), want)
	}
	if c.HostPath != "/host" || c.Global.LogLevel != "warn" || c.Global.RestAPIOn {
		t.Errorf("values: %+v", values(c))
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"imdb = { max_tables_num = \"x\"; };", `f.conf:1: imdb.max_tables_num: want an integer, got string "x"`},
		{"imdb = {\n record_timeout = 1.5; };", `f.conf:2: imdb.record_timeout: want an integer, got float 1.5`},
		{"global = { rest_api_on = 1; };", `f.conf:1: global.rest_api_on: want a boolean, got integer 1`},
		{"metric = { out_channel = logs; };", `f.conf:1: expected a value, found name "logs"`},
		{"metric = { kafka_topic = [\"a\"]; };", `f.conf:1: metric.kafka_topic: want a string, got array`},
		{"imdb = 5;", `f.conf:1: imdb: want a group { ... }, got integer`},
		{"imdb = { max_tables_num = 1 };\nimdb = {};", `f.conf:2: duplicate setting name "imdb"`},
		{"logs = { metric_dir = 1; event_dir = 2; };",
			"f.conf:1: logs.metric_dir: want a string, got integer 1\nf.conf:1: logs.event_dir: want a string, got integer 2"},
	}
	for _, c := range cases {
		_, err := Parse("f.conf", []byte(c.src))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q) error\n%v\nwant\n%s", c.src, err, c.want)
		}
	}
}

func TestDerived(t *testing.T) {
	c := Default()
	if got := c.DebugLogPath(); got != "/var/log/gala-gopher/debug/gopher.log" {
		t.Errorf("DebugLogPath = %q", got)
	}
	for lvl, want := range map[string]string{"debug": "DEBUG", "INFO": "INFO", "Warn": "WARN", "error": "ERROR"} {
		c.Global.LogLevel = lvl
		if got := c.SlogLevel().String(); got != want {
			t.Errorf("SlogLevel(%q) = %s, want %s", lvl, got, want)
		}
	}
	if c.WebServer.TLS() || !(HTTPServer{SSLAuth: "on"}).TLS() {
		t.Error("TLS()")
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	c := Default()
	c.Global.RestAPIOn = false
	c.Metric.OutChannel = ChannelKafka
	c.Kafka.Broker = "a:1,b:2"
	c.Logs.DebugDir = "/tmp/with \"quote\" and \\ back"
	c.IMDB.MaxRecordsNum = 1 << 40
	c.HostPath = "/host"
	for _, in := range []*Config{Default(), c} {
		out, err := Parse("marshalled", in.Marshal())
		if err != nil {
			t.Fatalf("Parse(Marshal()): %v\n%s", err, in.Marshal())
		}
		if !reflect.DeepEqual(values(out), values(in)) {
			t.Errorf("round trip: got\n%+v\nwant\n%+v", values(out), values(in))
		}
		if len(out.Warnings()) != 0 {
			t.Errorf("warnings: %q", out.Warnings())
		}
	}
	// Default() marshals to the shipped file's settings, in its order.
	shipped, err := os.ReadFile(shippedConf)
	if err != nil {
		t.Fatal(err)
	}
	want, err := libconfig.Parse("shipped", shipped)
	if err != nil {
		t.Fatal(err)
	}
	got, err := libconfig.Parse("marshalled", Default().Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if last := got.Elems[len(got.Elems)-1]; last.Name != "galago" {
		t.Fatalf("last section %q, want galago", last.Name)
	}
	got.Elems = got.Elems[:len(got.Elems)-1]
	// desc_language is not in the shipped file (see TestShippedFileIsDefault).
	for _, sec := range got.Elems {
		if sec.Name == "event" {
			sec.Elems = slices.DeleteFunc(sec.Elems, func(s *libconfig.Setting) bool { return s.Name == "desc_language" })
		}
	}
	if a, b := treeString(got), treeString(want); a != b {
		t.Errorf("Marshal(Default()) settings:\n%s\nshipped:\n%s", a, b)
	}
}

// treeString renders a tree without line numbers.
func treeString(s *libconfig.Setting) string {
	var b strings.Builder
	var walk func(s *libconfig.Setting, prefix string)
	walk = func(s *libconfig.Setting, prefix string) {
		for _, e := range s.Elems {
			if e.Kind == libconfig.KindGroup {
				walk(e, prefix+e.Name+".")
				continue
			}
			b.WriteString(prefix + e.Name + " = " + e.ValueString() + "\n")
		}
	}
	walk(s, "")
	return b.String()
}

func TestRuntimeSockets(t *testing.T) {
	c, err := Parse("f.conf", []byte(`galago = { cri_endpoints = " unix:///run/a.sock , /run/b.sock ,"; docker_socket = ""; };`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.CRISockets(); !slices.Equal(got, []string{"unix:///run/a.sock", "/run/b.sock"}) {
		t.Errorf("CRISockets = %q", got)
	}
	if c.DockerSocket != "" || c.ContainerdSocket != Default().ContainerdSocket {
		t.Errorf("docker %q (want disabled), containerd %q (want the default)", c.DockerSocket, c.ContainerdSocket)
	}
}
