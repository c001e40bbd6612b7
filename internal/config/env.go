package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ApplyEnv applies the GOPHER_* variables of gala-gopher's container
// entrypoint (which rewrites the file with sed; we set the fields). An
// empty variable counts as unset. Values are checked by Validate, whose
// errors then name the variable; ApplyEnv itself fails only on a value it
// cannot convert, naming the variable.
//
// Deliberate differences from the entrypoint:
//   - GOPHER_KAKFA_SERVER (its spelling) and GOPHER_KAFKA_SERVER are both
//     accepted. When neither is set the broker is left as the file says;
//     the entrypoint forces localhost:9092, which points a container at a
//     broker that is not there.
//   - GOPHER_REST_AUTH=yes changes rest_api_server only; the entrypoint's
//     unscoped sed also rewrites web_server's key paths. Its key/cert/CA
//     variables override the file only when set. Values other than yes/no
//     are rejected instead of meaning "no".
//   - GOPHER_PROBES_INIT is used in place of the probes.init file
//     (ProbesInitContent) instead of being written over it.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	var errs []error
	set := func(env, key string, dst *string) {
		if v := getenv(env); v != "" {
			*dst = v
			c.setOrigin(key, "env "+env)
		}
	}
	setInt := func(env, key string, dst *int) {
		v := strings.TrimSpace(getenv(env))
		if v == "" {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("env %s: %q is not an integer", env, v))
			return
		}
		*dst = n
		c.setOrigin(key, "env "+env)
	}
	setChannel := func(env, key string, dst *Channel) {
		s := string(*dst)
		set(env, key, &s)
		*dst = Channel(s)
	}

	set("GOPHER_LOG_LEVEL", "global.log_level", &c.Global.LogLevel)
	setChannel("GOPHER_EVENT_CHANNEL", "event.out_channel", &c.Event.OutChannel)
	setChannel("GOPHER_META_CHANNEL", "meta.out_channel", &c.Meta.OutChannel)

	broker, env := getenv("GOPHER_KAFKA_SERVER"), "GOPHER_KAFKA_SERVER"
	if sic := getenv("GOPHER_KAKFA_SERVER"); sic != "" {
		if broker != "" && broker != sic {
			errs = append(errs, fmt.Errorf("env GOPHER_KAFKA_SERVER %q and GOPHER_KAKFA_SERVER %q disagree: set one", broker, sic))
		}
		broker, env = sic, "GOPHER_KAKFA_SERVER"
	}
	if broker != "" {
		c.Kafka.Broker = withDefaultPort(broker, "9092")
		c.setOrigin("kafka.kafka_broker", "env "+env)
	}

	set("GOPHER_METRIC_ADDR", "web_server.bind_addr", &c.WebServer.BindAddr)
	setInt("GOPHER_METRIC_PORT", "web_server.port", &c.WebServer.Port)
	set("GOPHER_REST_ADDR", "rest_api_server.bind_addr", &c.RestAPIServer.BindAddr)
	setInt("GOPHER_REST_PORT", "rest_api_server.port", &c.RestAPIServer.Port)

	switch v := strings.TrimSpace(getenv("GOPHER_REST_AUTH")); strings.ToLower(v) {
	case "", "no":
	case "yes":
		c.RestAPIServer.SSLAuth = "on"
		c.setOrigin("rest_api_server.ssl_auth", "env GOPHER_REST_AUTH")
		set("GOPHER_REST_PRIVATE_KEY", "rest_api_server.private_key", &c.RestAPIServer.PrivateKey)
		set("GOPHER_REST_CERT", "rest_api_server.cert_file", &c.RestAPIServer.CertFile)
		set("GOPHER_REST_CAFILE", "rest_api_server.ca_file", &c.RestAPIServer.CAFile)
	default:
		errs = append(errs, fmt.Errorf("env GOPHER_REST_AUTH: %q is not yes or no", v))
	}

	setInt("GOPHER_METRIC_LOGS_TOTAL_SIZE", "logs.metric_total_size", &c.Logs.MetricTotalSize)
	set("GOPHER_HOST_PATH", "galago.host_path", &c.HostPath)
	c.ProbesInitContent = getenv("GOPHER_PROBES_INIT")
	return errors.Join(errs...)
}

// withDefaultPort appends :port to each comma-separated broker that has
// none ("kafka" -> "kafka:9092", "[::1]" -> "[::1]:9092", "::1" ->
// "[::1]:9092").
func withDefaultPort(brokers, port string) string {
	parts := strings.Split(brokers, ",")
	for i, b := range parts {
		b = strings.TrimSpace(b)
		switch {
		case b == "":
		case strings.HasPrefix(b, "["):
			if strings.HasSuffix(b, "]") {
				b += ":" + port
			}
		case strings.Count(b, ":") == 0:
			b += ":" + port
		case strings.Count(b, ":") > 1:
			b = "[" + b + "]:" + port
		}
		parts[i] = b
	}
	return strings.Join(parts, ",")
}
