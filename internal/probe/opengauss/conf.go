package opengauss

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Server is one database server to poll: gala-gopher's pg_stat_probe.conf
// entry.
type Server struct {
	IP       string
	Port     int
	DBName   string
	User     string
	Password string
}

// rawServer takes port as a number or a string ("5432", as gala-gopher's
// sample file quotes it).
type rawServer struct {
	IP       *string `yaml:"ip"`
	Port     *string `yaml:"port"`
	DBName   *string `yaml:"dbname"`
	User     *string `yaml:"user"`
	Password *string `yaml:"password"`
}

// ParseConf reads gala-gopher's pg_stat_probe.conf (YAML):
//
//	servers:
//	  - ip: "192.168.0.23"
//	    port: "5432"
//	    dbname: "postgres"
//	    user: "opengauss_exporter"
//	    password: "opengauss_exporter123"
//
// Every field is required (password may be empty); an error names the
// entry and the field.
func ParseConf(b []byte) ([]Server, error) {
	var doc struct {
		Servers []rawServer `yaml:"servers"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("pg_stat_probe.conf: %w", err)
	}
	if len(doc.Servers) == 0 {
		return nil, errors.New("pg_stat_probe.conf: no servers")
	}
	out := make([]Server, 0, len(doc.Servers))
	for i, r := range doc.Servers {
		where := fmt.Sprintf("pg_stat_probe.conf: servers[%d]", i)
		var s Server
		for _, f := range []struct {
			name     string
			v        *string
			dst      *string
			required bool
		}{
			{"ip", r.IP, &s.IP, true}, {"dbname", r.DBName, &s.DBName, true},
			{"user", r.User, &s.User, true}, {"password", r.Password, &s.Password, false},
		} {
			if f.v == nil {
				return nil, fmt.Errorf("%s: no %s", where, f.name)
			}
			if f.required && strings.TrimSpace(*f.v) == "" {
				return nil, fmt.Errorf("%s: empty %s", where, f.name)
			}
			*f.dst = *f.v
		}
		if r.Port == nil {
			return nil, fmt.Errorf("%s: no port", where)
		}
		p, err := strconv.Atoi(strings.TrimSpace(*r.Port))
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%s: port %q is not a TCP port (1..65535)", where, *r.Port)
		}
		s.Port = p
		out = append(out, s)
	}
	return out, nil
}

// connString is s as a libpq keyword/value string, gala-gopher's
// parameters (connect_timeout=3); sslmode is libpq's default, prefer.
func (s Server) connString() string {
	q := func(v string) string {
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
	}
	return fmt.Sprintf("host=%s port=%d dbname=%s user=%s password=%s connect_timeout=3",
		q(s.IP), s.Port, q(s.DBName), q(s.User), q(s.Password))
}
