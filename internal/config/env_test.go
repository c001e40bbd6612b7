package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestApplyEnvAll(t *testing.T) {
	c := Default()
	err := c.ApplyEnv(env(map[string]string{
		"GOPHER_LOG_LEVEL":              "debug",
		"GOPHER_EVENT_CHANNEL":          "kafka",
		"GOPHER_META_CHANNEL":           "kafka",
		"GOPHER_KAKFA_SERVER":           "broker1",
		"GOPHER_METRIC_ADDR":            "0.0.0.0",
		"GOPHER_METRIC_PORT":            "18888",
		"GOPHER_REST_ADDR":              "0.0.0.0",
		"GOPHER_REST_PORT":              " 19999 ",
		"GOPHER_REST_AUTH":              "yes",
		"GOPHER_REST_PRIVATE_KEY":       "/etc/k.pem",
		"GOPHER_REST_CERT":              "/etc/c.pem",
		"GOPHER_REST_CAFILE":            "/etc/ca.pem",
		"GOPHER_METRIC_LOGS_TOTAL_SIZE": "200",
		"GOPHER_HOST_PATH":              "/host",
		"GOPHER_PROBES_INIT":            "tcp {\"state\":\"running\"}\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Global.LogLevel = "debug"
	want.Event.OutChannel = ChannelKafka
	want.Meta.OutChannel = ChannelKafka
	want.Kafka.Broker = "broker1:9092"
	want.WebServer.BindAddr, want.WebServer.Port = "0.0.0.0", 18888
	// Only the REST server gets the TLS settings (the entrypoint's sed
	// also rewrites web_server's).
	want.RestAPIServer = HTTPServer{BindAddr: "0.0.0.0", Port: 19999, SSLAuth: "on",
		PrivateKey: "/etc/k.pem", CertFile: "/etc/c.pem", CAFile: "/etc/ca.pem"}
	want.Logs.MetricTotalSize = 200
	want.HostPath = "/host"
	want.ProbesInitContent = "tcp {\"state\":\"running\"}\n"
	if !reflect.DeepEqual(values(c), values(want)) {
		t.Errorf("got\n%+v\nwant\n%+v", values(c), values(want))
	}
}

func TestApplyEnvUnset(t *testing.T) {
	c := mustParse(t, `kafka = { kafka_broker = "file:1"; }; rest_api_server = { ssl_auth = "on"; private_key = "/k"; };`)
	before := values(c)
	if err := c.ApplyEnv(env(nil)); err != nil {
		t.Fatal(err)
	}
	// Unlike the entrypoint, no broker is forced to localhost:9092.
	if !reflect.DeepEqual(values(c), before) {
		t.Errorf("empty environment changed the config:\n%+v", values(c))
	}
	// GOPHER_REST_AUTH=yes without key variables keeps the file's paths.
	if err := c.ApplyEnv(env(map[string]string{"GOPHER_REST_AUTH": "YES", "GOPHER_REST_CERT": "/c"})); err != nil {
		t.Fatal(err)
	}
	if r := c.RestAPIServer; r.PrivateKey != "/k" || r.CertFile != "/c" || r.CAFile != "" || !r.TLS() {
		t.Errorf("rest server %+v", r)
	}
	if err := c.ApplyEnv(env(map[string]string{"GOPHER_REST_AUTH": "no"})); err != nil || !c.RestAPIServer.TLS() {
		t.Errorf("GOPHER_REST_AUTH=no: err %v, TLS %v (no leaves the file's setting)", err, c.RestAPIServer.TLS())
	}
}

func TestKafkaServerEnv(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GOPHER_KAKFA_SERVER": "kafka"}, "kafka:9092"},
		{map[string]string{"GOPHER_KAFKA_SERVER": "kafka:29092"}, "kafka:29092"},
		{map[string]string{"GOPHER_KAFKA_SERVER": "10.0.0.1"}, "10.0.0.1:9092"},
		{map[string]string{"GOPHER_KAFKA_SERVER": "[fd00::1]"}, "[fd00::1]:9092"},
		{map[string]string{"GOPHER_KAFKA_SERVER": "fd00::1"}, "[fd00::1]:9092"},
		{map[string]string{"GOPHER_KAFKA_SERVER": "[fd00::1]:1"}, "[fd00::1]:1"},
		{map[string]string{"GOPHER_KAFKA_SERVER": "a, b:1,c"}, "a:9092,b:1,c:9092"},
		{map[string]string{"GOPHER_KAFKA_SERVER": "same", "GOPHER_KAKFA_SERVER": "same"}, "same:9092"},
	}
	for _, c := range cases {
		cfg := Default()
		if err := cfg.ApplyEnv(env(c.env)); err != nil || cfg.Kafka.Broker != c.want {
			t.Errorf("%v: broker %q, err %v; want %q", c.env, cfg.Kafka.Broker, err, c.want)
		}
	}
}

func TestApplyEnvErrors(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GOPHER_METRIC_PORT": "http"}, `env GOPHER_METRIC_PORT: "http" is not an integer`},
		{map[string]string{"GOPHER_REST_PORT": "9999x"}, `env GOPHER_REST_PORT: "9999x" is not an integer`},
		{map[string]string{"GOPHER_METRIC_LOGS_TOTAL_SIZE": "1.5"}, `env GOPHER_METRIC_LOGS_TOTAL_SIZE: "1.5" is not an integer`},
		{map[string]string{"GOPHER_REST_AUTH": "true"}, `env GOPHER_REST_AUTH: "true" is not yes or no`},
		{map[string]string{"GOPHER_KAFKA_SERVER": "a", "GOPHER_KAKFA_SERVER": "b"},
			`env GOPHER_KAFKA_SERVER "a" and GOPHER_KAKFA_SERVER "b" disagree: set one`},
		{map[string]string{"GOPHER_METRIC_PORT": "x", "GOPHER_REST_PORT": "y"},
			"env GOPHER_METRIC_PORT: \"x\" is not an integer\nenv GOPHER_REST_PORT: \"y\" is not an integer"},
	}
	for _, c := range cases {
		if err := Default().ApplyEnv(env(c.env)); err == nil || err.Error() != c.want {
			t.Errorf("%v: error\n%v\nwant\n%s", c.env, err, c.want)
		}
	}
}

// Values from the environment are validated like the file's, and the
// errors name the variable.
func TestValidateNamesEnv(t *testing.T) {
	dir := t.TempDir()
	missing, cert := filepath.Join(dir, "k.pem"), filepath.Join(dir, "c.pem")
	if err := os.WriteFile(cert, []byte("c"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GOPHER_REST_PORT": "80"}, `env GOPHER_REST_PORT: rest_api_server.port: 80 out of range [1024, 65535]`},
		{map[string]string{"GOPHER_METRIC_PORT": "99999"}, `env GOPHER_METRIC_PORT: web_server.port: 99999 out of range [1024, 65535]`},
		{map[string]string{"GOPHER_LOG_LEVEL": "trace"},
			`env GOPHER_LOG_LEVEL: global.log_level: "trace" is not one of "debug", "info", "warn", "error"`},
		{map[string]string{"GOPHER_EVENT_CHANNEL": "json"},
			`env GOPHER_EVENT_CHANNEL: event.out_channel: "json" is not one of "logs", "kafka", ""`},
		{map[string]string{"GOPHER_META_CHANNEL": "kafka"},
			`kafka.kafka_broker: must not be empty when an out_channel is kafka`},
		{map[string]string{"GOPHER_META_CHANNEL": "kafka", "GOPHER_KAFKA_SERVER": "k:0"},
			`env GOPHER_KAFKA_SERVER: kafka.kafka_broker: "k:0": want host:port with a port in [1, 65535]`},
		{map[string]string{"GOPHER_METRIC_LOGS_TOTAL_SIZE": "0"},
			`env GOPHER_METRIC_LOGS_TOTAL_SIZE: logs.metric_total_size: 0 out of range [1, 1024]`},
		{map[string]string{"GOPHER_REST_AUTH": "yes"},
			"rest_api_server.private_key: required when ssl_auth is on\nrest_api_server.cert_file: required when ssl_auth is on"},
		{map[string]string{"GOPHER_REST_AUTH": "yes", "GOPHER_REST_PRIVATE_KEY": missing, "GOPHER_REST_CERT": cert, "GOPHER_REST_CAFILE": dir},
			"env GOPHER_REST_PRIVATE_KEY: rest_api_server.private_key: stat " + missing + ": no such file or directory\n" +
				"env GOPHER_REST_CAFILE: rest_api_server.ca_file: " + dir + " is not a regular file"},
		{map[string]string{"GOPHER_HOST_PATH": "host"}, `env GOPHER_HOST_PATH: galago.host_path: "host" is not an absolute path`},
	}
	for _, c := range cases {
		cfg := Default()
		if err := cfg.ApplyEnv(env(c.env)); err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if err := cfg.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("%v: Validate\n%v\nwant\n%s", c.env, err, c.want)
		}
	}
}
